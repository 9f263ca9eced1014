//! Just enough terminal handling for `weft top`: keys without Enter and without echo, and the
//! terminal put back as it was on the way out.

use std::io::{self, IsTerminal};
use std::os::fd::AsFd;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, LocalFlags, SetArg, Termios};

/// A key that matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `q`, `Q` or Ctrl-C.
    Quit,
    /// Anything else.
    Other,
}

/// Stdin in non-canonical, no-echo mode when it is a terminal; restored on drop. Signals
/// stay on, so Ctrl-C still raises SIGINT.
pub struct Terminal {
    saved: Option<Termios>,
    is_tty: bool,
}

impl Terminal {
    /// Takes the terminal when stdin is one; otherwise keys are simply never seen.
    pub fn open() -> Terminal {
        let stdin = io::stdin();
        if !stdin.is_terminal() {
            return Terminal {
                saved: None,
                is_tty: false,
            };
        }
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(original) = &saved {
            let mut raw = original.clone();
            raw.local_flags
                .remove(LocalFlags::ICANON | LocalFlags::ECHO);
            // If this fails, keys need Enter; top still works.
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
        }
        Terminal {
            saved,
            is_tty: true,
        }
    }

    /// Waits up to `timeout` for a key.
    pub fn wait_key(&mut self, timeout: Duration) -> Option<Key> {
        if !self.is_tty {
            std::thread::sleep(timeout);
            return None;
        }
        let stdin = io::stdin();
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(n) if n > 0 => {}
            // Timeout, or a signal (the caller checks its flag).
            _ => return None,
        }
        let mut buf = [0u8; 64];
        match nix::unistd::read(stdin.as_fd(), &mut buf) {
            Ok(0) => {
                // End of input: stop watching it, keep refreshing.
                self.is_tty = false;
                None
            }
            Ok(n) => Some(key_of(&buf[..n])),
            Err(_) => None,
        }
    }
}

/// What a burst of input bytes means.
pub fn key_of(bytes: &[u8]) -> Key {
    if bytes.iter().any(|b| matches!(b, b'q' | b'Q' | 0x03)) {
        Key::Quit
    } else {
        Key::Other
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(original) = &self.saved {
            let _ = termios::tcsetattr(io::stdin().as_fd(), SetArg::TCSANOW, original);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_and_ctrl_c_quit() {
        assert_eq!(key_of(b"q"), Key::Quit);
        assert_eq!(key_of(b"xQ"), Key::Quit);
        assert_eq!(key_of(&[0x03]), Key::Quit);
        assert_eq!(key_of(b" "), Key::Other);
    }
}

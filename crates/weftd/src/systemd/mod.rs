//! Working with systemd: the notification socket (`READY=1`, `MAINPID=`, `STOPPING=1`,
//! and descriptors for the file descriptor store), and the descriptors it passes back to
//! a service it restarts. Nothing here needs systemd: without `$NOTIFY_SOCKET` and
//! `$LISTEN_PID` every part does nothing.

pub mod fd_store;
pub mod listen_fds;
pub mod notify;

pub use fd_store::{FdStore, Passed};
pub use notify::NotifySocket;

//! The XDP program that sends an interface's frames to the port's socket, embedded
//! prebuilt (`bpf/redirect.c`, built by `bpf/build.sh`), loaded and attached with aya.
//!
//! Attached through a `bpf_link` (kernel 5.9+): the program is detached when the link is
//! closed, that is when [`Program`] is dropped, and also when the process dies.

use std::os::fd::AsFd;

use aya::maps::XskMap;
use aya::programs::{ProgramError, Xdp};
use aya::Ebpf;

use crate::error::XdpError;

/// The compiled program (an ELF object for the BPF target).
pub(crate) static OBJECT: &[u8] = aya::include_bytes_aligned!("../bpf/redirect.o");
/// The program's name in the object.
pub(crate) const PROGRAM_NAME: &str = "weft_redirect";
/// The XSKMAP's name in the object: receive queue index → socket.
pub(crate) const MAP_NAME: &str = "weft_xsks";

/// How the program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attachment {
    /// In the driver (native XDP).
    Native,
    /// In the kernel's generic receive path (skb XDP).
    Generic,
}

/// The loaded and attached program with its map. Dropping it detaches the program.
pub(crate) struct Program {
    ebpf: Ebpf,
    attachment: Attachment,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("attachment", &self.attachment)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Loads the program and attaches it to `ifname` as each of `modes` in turn, the first
    /// that the kernel accepts.
    pub(crate) fn attach(ifname: &str, modes: &[Attachment]) -> Result<Program, XdpError> {
        let program_error = |reason: String| XdpError::Program { reason };
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| program_error(e.to_string()))?;
        let xdp: &mut Xdp = ebpf
            .program_mut(PROGRAM_NAME)
            .ok_or_else(|| program_error(format!("no program {PROGRAM_NAME} in the object")))?
            .try_into()
            .map_err(|e: ProgramError| program_error(e.to_string()))?;
        xdp.load().map_err(|e| program_error(detail(&e)))?;
        let mut last = None;
        for &mode in modes {
            let flags = match mode {
                Attachment::Native => aya::programs::XdpMode::Driver,
                Attachment::Generic => aya::programs::XdpMode::Skb,
            };
            match xdp.attach(ifname, flags) {
                Ok(_) => {
                    return Ok(Program {
                        ebpf,
                        attachment: mode,
                    })
                }
                Err(e) => last = Some((mode, e)),
            }
        }
        let Some((mode, e)) = last else {
            return Err(program_error("no XDP mode to attach in".into()));
        };
        Err(attach_error(ifname, mode, &e))
    }

    /// How it is attached.
    pub(crate) fn attachment(&self) -> Attachment {
        self.attachment
    }

    /// Sends queue `queue`'s frames to the socket `socket`.
    pub(crate) fn register(
        &mut self,
        ifname: &str,
        queue: u32,
        socket: impl AsFd,
    ) -> Result<(), XdpError> {
        let map = self
            .ebpf
            .map_mut(MAP_NAME)
            .ok_or_else(|| XdpError::Program {
                reason: format!("no map {MAP_NAME} in the object"),
            })?;
        let mut xsks = XskMap::try_from(map).map_err(|e| XdpError::Program {
            reason: e.to_string(),
        })?;
        let raw = std::os::fd::AsRawFd::as_raw_fd(&socket.as_fd());
        xsks.set(queue, raw, 0).map_err(|e| XdpError::Attach {
            ifname: ifname.to_string(),
            mode: self.attachment.name(),
            reason: format!("putting the socket in {MAP_NAME}[{queue}]: {e}"),
            hint: "",
        })
    }
}

impl Attachment {
    /// As `port show` and errors spell it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Attachment::Native => "native",
            Attachment::Generic => "generic",
        }
    }
}

/// The error with its causes (aya's display names the call, its source the errno).
fn detail(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn os_error(e: &ProgramError) -> Option<i32> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        source = s.source();
    }
    None
}

fn attach_error(ifname: &str, mode: Attachment, e: &ProgramError) -> XdpError {
    if let ProgramError::UnknownInterface { .. } = e {
        return XdpError::NoInterface {
            ifname: ifname.to_string(),
        };
    }
    match os_error(e) {
        Some(libc::EBUSY) | Some(libc::EEXIST) => XdpError::ProgramPresent {
            ifname: ifname.to_string(),
        },
        errno => XdpError::Attach {
            ifname: ifname.to_string(),
            mode: mode.name(),
            reason: detail(e),
            hint: match (mode, errno) {
                (Attachment::Native, Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)) => {
                    " (the driver has no native XDP, or not with this MTU or queue count: \
                     use --mode generic, or auto)"
                }
                _ => "",
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_object_holds_the_redirect_program_and_the_socket_map() {
        let object = aya_obj::Object::parse(OBJECT).expect("the embedded object parses");
        assert!(
            object.programs.contains_key(PROGRAM_NAME),
            "programs: {:?}",
            object.programs.keys().collect::<Vec<_>>()
        );
        let map = object.maps.get(MAP_NAME).expect("the map is there");
        assert_eq!(
            map.map_type(),
            aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_XSKMAP as u32
        );
        assert_eq!(map.key_size(), 4);
        assert!(map.max_entries() >= 64);
    }

    #[test]
    fn the_embedded_object_was_built_from_the_source_beside_it() {
        let source = include_str!("../bpf/redirect.c");
        assert!(source.contains(&format!("int {PROGRAM_NAME}(")));
        assert!(source.contains(&format!("}} {MAP_NAME} SEC(\".maps\")")));
        // build.sh records the source's path relative to the crate in the BTF line info.
        let path = b"bpf/redirect.c";
        assert!(OBJECT.windows(path.len()).any(|w| w == path));
    }
}

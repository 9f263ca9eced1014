//! `packet_out`: a controller sends a frame out of a port, or into a switch as if a port had
//! received it. The frame is client input bound for the data path: checked here (switch,
//! port, hex, length), then handed to the worker of the switch's first lane, which checks
//! it against the port's MTU and sends or forwards it between two batches, through the
//! same counters as any frame (`weft_switch::Switch::send_out`, `inject`).

use weft_control::{ControlError, ErrorKind, Response};
use weft_switch::PacketOutError;

use super::Controller;

/// The shortest frame: an Ethernet header.
const MIN_FRAME: usize = 14;
/// The longest: a 64 KiB super-frame is the most any port takes.
const MAX_FRAME: usize = 65535 + 18;

impl Controller {
    pub(super) fn packet_out(
        &mut self,
        switch: &str,
        output: Option<&str>,
        in_port: Option<&str>,
        frame: &str,
    ) -> Result<Response, ControlError> {
        let (port, inject) =
            match (output, in_port) {
                (Some(p), None) => (p, false),
                (None, Some(p)) => (p, true),
                _ => return Err(ControlError::invalid(
                    "packet_out needs exactly one of output and in_port",
                )
                .with_hint(
                    "output sends the frame out of that port as it is; in_port runs it through \
                     the switch as if that port had received it",
                )),
            };
        let rt = self.switch_rt(switch)?;
        let home = rt.home();
        let id = self.port_rt(switch, port)?.id;
        if frame.len() / 2 > MAX_FRAME {
            return Err(ControlError::invalid(format!(
                "a frame of {} bytes is longer than any port takes ({MAX_FRAME} bytes)",
                frame.len() / 2
            )));
        }
        let bytes = weft_control::codec::hex_decode(frame).ok_or_else(|| {
            ControlError::invalid("frame is not hex")
                .with_hint("give the whole Ethernet frame as hex digits, two per byte")
        })?;
        if bytes.len() < MIN_FRAME {
            return Err(ControlError::invalid(format!(
                "a frame of {} bytes is shorter than an Ethernet header ({MIN_FRAME} bytes)",
                bytes.len()
            )));
        }
        let sent = self.pool.on_switch(home, switch, move |sw, now| {
            if inject {
                sw.inject(id, &bytes, now)
            } else {
                sw.send_out(id, &bytes, now)
            }
        })?;
        sent.map(|()| Response::Done)
            .map_err(|e| refused(e, switch, port))
    }
}

fn refused(e: PacketOutError, switch: &str, port: &str) -> ControlError {
    match e {
        PacketOutError::NoSuchPort(_) => super::no_port(switch, port),
        PacketOutError::TooShort(_) | PacketOutError::TooBig { .. } => {
            ControlError::invalid(format!("port {port:?}: {e}"))
                .with_hint("weft port show SWITCH:PORT tells the port's MTU")
        }
        PacketOutError::TxQueueFull => ControlError::new(
            ErrorKind::LimitReached,
            format!("port {port:?}: {e}; the frame was dropped and counted"),
        )
        .with_hint("send again later"),
    }
}

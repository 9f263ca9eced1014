//! `packet_out`: a controller sends a frame out of a port, or into a switch as if a port had
//! received it. The frame is client input bound for the data path: checked here (switch,
//! port, hex, length), then handed to the worker of the switch's first lane, which checks
//! it against the port's MTU and sends or forwards it between two batches, through the
//! same counters as any frame (`weft_switch::Switch::send_out`, `inject`).

use weft_control::{ControlError, ErrorKind, Response};
use weft_switch::{PacketOutError, Pipeline};

use super::Controller;

/// The shortest frame: an Ethernet header.
const MIN_FRAME: usize = 14;
/// The longest: a 64 KiB super-frame is the most any port takes.
const MAX_FRAME: usize = 65535 + 18;

/// Where a controller's frame goes.
pub(super) enum To<'a> {
    /// Out of this port, as it is.
    Output(&'a str),
    /// Into the switch by this port, through this much of it.
    Input(&'a str, Pipeline),
}

impl<'a> To<'a> {
    /// Where a request sends its frame: exactly one of `output` and `in_port`, `normal` only
    /// with `in_port`.
    pub(super) fn of(
        output: Option<&'a str>,
        in_port: Option<&'a str>,
        normal: bool,
    ) -> Result<To<'a>, ControlError> {
        let hint = "output sends the frame out of that port as it is; in_port runs it through \
                    the switch as if that port had received it (with normal: through the \
                    learning bridge alone, skipping the rules)";
        match (output, in_port, normal) {
            (Some(port), None, false) => Ok(To::Output(port)),
            (None, Some(port), false) => Ok(To::Input(port, Pipeline::Rules)),
            (None, Some(port), true) => Ok(To::Input(port, Pipeline::Normal)),
            (Some(_), None, true) => {
                Err(ControlError::invalid("normal goes with in_port, not output").with_hint(hint))
            }
            _ => Err(
                ControlError::invalid("packet_out needs exactly one of output and in_port")
                    .with_hint(hint),
            ),
        }
    }
}

impl Controller {
    pub(super) fn packet_out(
        &mut self,
        switch: &str,
        to: To<'_>,
        frame: &str,
    ) -> Result<Response, ControlError> {
        let (port, inject) = match to {
            To::Output(port) => (port, None),
            To::Input(port, pipeline) => (port, Some(pipeline)),
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
        let sent = self
            .pool
            .on_switch(home, switch, move |sw, now| match inject {
                Some(pipeline) => sw.inject(id, &bytes, pipeline, now),
                None => sw.send_out(id, &bytes, now),
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

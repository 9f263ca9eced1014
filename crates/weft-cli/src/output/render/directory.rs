//! `weft directory status` for people.

use weft_control::response::DirectoryStatus;

/// The directory client's state, one fact per line.
pub(super) fn status(s: &DirectoryStatus) -> String {
    if !s.configured {
        return "no directory: weftd's configuration has no [directory] table\n".into();
    }
    let mut out = String::new();
    let state = if s.connected {
        "connected"
    } else {
        "not connected (forwarding goes on from what it last knew)"
    };
    out.push_str(&format!("directory  {state}\n"));
    out.push_str(&format!("endpoints  {}\n", s.endpoints.join(", ")));
    out.push_str(&format!("host       {}\n", s.host));
    out.push_str(&format!("revision   {}\n", s.revision));
    if s.lease != 0 {
        out.push_str(&format!("lease      {:x}\n", s.lease));
    }
    let vnis: Vec<String> = s.vnis.iter().map(ToString::to_string).collect();
    out.push_str(&format!(
        "vnis       {}\n",
        if vnis.is_empty() {
            "none (no VXLAN port with --directory)".to_string()
        } else {
            vnis.join(", ")
        }
    ));
    out.push_str(&format!(
        "entries    {} remote endpoints, {} MAC claims ({} of them this host's)\n",
        s.vteps, s.macs, s.published
    ));
    out.push_str(&format!(
        "activity   {} writes, {} full reads, {} sessions\n",
        s.writes, s.resyncs, s.sessions
    ));
    if !s.refused.is_empty() {
        let refused: Vec<String> = s.refused.iter().map(|(r, n)| format!("{r} {n}")).collect();
        out.push_str(&format!("refused    {}\n", refused.join(", ")));
    }
    if let Some(e) = &s.last_error {
        out.push_str(&format!("last error {e}\n"));
    }
    out
}

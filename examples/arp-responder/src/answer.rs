//! The responder's logic, pure: which frames are ARP requests it may answer, and the reply.
//! Every frame comes from a station through the switch: it is read with bounds checks, and
//! whatever is not a well-formed Ethernet/IPv4 ARP request for a known address is left to
//! the switch, by reason.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use weft_packet::arp::PACKET_LEN;
use weft_packet::ethernet::{ethertype, HEADER_LEN};
use weft_packet::{ArpOperation, ArpPacket, ArpRepr, EthernetFrame, MacAddr};

/// The addresses the responder answers for.
pub(crate) type Table = BTreeMap<Ipv4Addr, MacAddr>;

/// What to do with one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Send this reply out of the asking port.
    Reply(Vec<u8>),
    /// A request for an address not in the table: the switch floods it as usual.
    Unknown(Ipv4Addr),
    /// Not something to answer, and why: the switch forwards it as usual.
    Ignored(&'static str),
}

/// The answer to `frame` (the bytes of one upcall).
pub(crate) fn answer(table: &Table, frame: &[u8]) -> Verdict {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Verdict::Ignored("shorter than an Ethernet header");
    };
    if eth.ethertype() != ethertype::ARP {
        // Tagged requests too: the reply would need the tag, which this example leaves out.
        return Verdict::Ignored("not untagged ARP");
    }
    let Ok(arp) = ArpPacket::new_checked(eth.payload()) else {
        return Verdict::Ignored("ARP cut short");
    };
    if arp.check_format().is_err() {
        return Verdict::Ignored("not Ethernet/IPv4 ARP");
    }
    let request = ArpRepr::parse(&arp);
    if request.operation != ArpOperation::Request {
        return Verdict::Ignored("not a request");
    }
    if !request.sender_mac.is_unicast() || request.sender_mac != eth.src_addr() {
        return Verdict::Ignored("sender address is not the frame's unicast source");
    }
    let Some(&owner) = table.get(&request.target_ip) else {
        return Verdict::Unknown(request.target_ip);
    };
    if request.sender_ip == request.target_ip {
        // A gratuitous ARP or an address probe: the owner's to answer, not a proxy's.
        return Verdict::Ignored("gratuitous ARP or probe");
    }
    let reply = ArpRepr::reply_to(&request, owner);
    let mut out = vec![0u8; HEADER_LEN + PACKET_LEN];
    let Ok(mut reply_eth) = EthernetFrame::new_checked(&mut out[..]) else {
        return Verdict::Ignored("internal: reply buffer");
    };
    reply_eth.set_dst_addr(request.sender_mac);
    reply_eth.set_src_addr(owner);
    reply_eth.set_ethertype(ethertype::ARP);
    if reply.emit(reply_eth.payload_mut()).is_err() {
        return Verdict::Ignored("internal: reply buffer");
    }
    // Padded to the Ethernet minimum, as a NIC would.
    out.resize(60, 0);
    Verdict::Reply(out)
}

/// Reads `IPV4=MAC` (a command-line entry) or `IPV4 MAC` (a line of a table file).
pub(crate) fn parse_entry(text: &str) -> Result<(Ipv4Addr, MacAddr), String> {
    let mut parts = text
        .split(|c: char| c == '=' || c.is_whitespace())
        .filter(|p| !p.is_empty());
    let (Some(ip), Some(mac), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!(
            "{text:?}: give IPV4=MAC, e.g. 10.0.0.2=02:00:00:00:00:02"
        ));
    };
    let ip: Ipv4Addr = ip.parse().map_err(|e| format!("{ip:?}: {e}"))?;
    let mac: MacAddr = mac.parse().map_err(|e| format!("{mac:?}: {e}"))?;
    if !mac.is_unicast() {
        return Err(format!("{mac}: answer only with a unicast MAC"));
    }
    Ok((ip, mac))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ASKER: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const OWNER: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, last)
    }

    fn table() -> Table {
        Table::from([(ip(2), OWNER)])
    }

    fn request(sender_mac: MacAddr, sender_ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f[..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&sender_mac.0);
        f[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        ArpRepr::request(sender_mac, sender_ip, target)
            .emit(&mut f[14..])
            .unwrap();
        f
    }

    #[test]
    fn a_request_for_a_known_address_gets_the_owners_reply() {
        let Verdict::Reply(f) = answer(&table(), &request(ASKER, ip(1), ip(2))) else {
            panic!("no reply")
        };
        assert_eq!(f.len(), 60);
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!((eth.dst_addr(), eth.src_addr()), (ASKER, OWNER));
        let arp = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap());
        assert_eq!(
            arp,
            ArpRepr::reply_to(&ArpRepr::request(ASKER, ip(1), ip(2)), OWNER)
        );
    }

    #[test]
    fn unknown_targets_and_hostile_frames_are_not_answered() {
        let t = table();
        assert_eq!(
            answer(&t, &request(ASKER, ip(1), ip(9))),
            Verdict::Unknown(ip(9))
        );
        let good = request(ASKER, ip(1), ip(2));
        for cut in 0..good.len() {
            assert!(
                matches!(answer(&t, &good[..cut]), Verdict::Ignored(_)),
                "cut at {cut}"
            );
        }
        let mut reply = good.clone();
        reply[21] = 2;
        assert_eq!(answer(&t, &reply), Verdict::Ignored("not a request"));
        let mut ipv6_arp = good.clone();
        ipv6_arp[16] = 0x86;
        assert!(matches!(answer(&t, &ipv6_arp), Verdict::Ignored(_)));
        let spoofed = request(MacAddr([2, 0, 0, 0, 0, 7]), ip(1), ip(2));
        let mut spoofed = spoofed;
        spoofed[6..12].copy_from_slice(&ASKER.0);
        assert!(matches!(answer(&t, &spoofed), Verdict::Ignored(_)));
        assert!(matches!(
            answer(&t, &request(ASKER, ip(2), ip(2))),
            Verdict::Ignored(_)
        ));
        let mut garbage = vec![0xffu8; 1500];
        garbage[12..14].copy_from_slice(&ethertype::ARP.to_be_bytes());
        assert!(matches!(answer(&t, &garbage), Verdict::Ignored(_)));
    }

    #[test]
    fn entries_read_from_arguments_and_files() {
        assert_eq!(
            parse_entry("10.0.0.2=02:00:00:00:00:02"),
            Ok((ip(2), OWNER))
        );
        assert_eq!(
            parse_entry("  10.0.0.2   02:00:00:00:00:02 "),
            Ok((ip(2), OWNER))
        );
        assert!(parse_entry("10.0.0.2").is_err());
        assert!(parse_entry("10.0.0.256=02:00:00:00:00:02").is_err());
        assert!(parse_entry("10.0.0.2=ff:ff:ff:ff:ff:ff").is_err());
        assert!(parse_entry("10.0.0.2=02:00:00:00:00:02 x").is_err());
    }
}

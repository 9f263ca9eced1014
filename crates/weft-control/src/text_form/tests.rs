use std::net::{IpAddr, SocketAddr};

use proptest::prelude::*;
use weft_packet::{MacAddr, Vni};

use crate::request::Request;
use crate::rule::{IpPattern, MacPattern, MatchSpec};
use crate::state::{PortKind, RemoteMac, StaticMac};
use crate::{decode_request, ErrorKind};

fn vxlan(local: IpAddr, vni: Vni, remotes: Vec<IpAddr>, remote_macs: Vec<RemoteMac>) -> PortKind {
    PortKind::Vxlan {
        local,
        vni,
        remotes,
        netns: None,
        learning: true,
        port: None,
        remote_macs,
        remote_ageing: 300,
        directory: false,
    }
}

fn tcp_link(listen: Option<SocketAddr>, connect: Option<SocketAddr>) -> PortKind {
    PortKind::TcpLink {
        listen,
        connect,
        netns: None,
        link_id: 0,
        mtu: 1500,
        offloads: true,
        key_file: None,
    }
}

proptest! {
    #[test]
    fn a_mac_is_written_as_six_lowercase_hex_pairs_and_read_back(bytes in any::<[u8; 6]>()) {
        let entry = StaticMac { vlan: 0, mac: MacAddr(bytes), port: "p".into() };
        let json = serde_json::to_value(&entry).unwrap();
        let text = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5]
        );
        prop_assert_eq!(&json["mac"], &serde_json::Value::String(text.clone()));
        prop_assert_eq!(serde_json::from_value::<StaticMac>(json).unwrap(), entry.clone());
        // Upper case and dashes are read as the same address (and written canonically).
        let other = serde_json::json!({"vlan": 0, "mac": text.to_uppercase().replace(':', "-"), "port": "p"});
        prop_assert_eq!(serde_json::from_value::<StaticMac>(other).unwrap(), entry);
    }

    #[test]
    fn a_vni_is_written_as_its_number_and_read_back(value in 0u32..=0x00ff_ffff) {
        let kind = vxlan("192.0.2.1".parse().unwrap(), Vni::new(value).unwrap(), Vec::new(), Vec::new());
        let json = serde_json::to_value(&kind).unwrap();
        prop_assert_eq!(&json["vni"], &serde_json::Value::from(value));
        prop_assert_eq!(serde_json::from_value::<PortKind>(json).unwrap(), kind);
    }

    #[test]
    fn a_vni_beyond_24_bits_is_refused_with_the_range(value in 0x0100_0000u32..) {
        let json = serde_json::json!({"type": "vxlan", "local": "192.0.2.1", "vni": value});
        let e = serde_json::from_value::<PortKind>(json).unwrap_err().to_string();
        prop_assert!(e.contains(&format!("vni {value} is out of range: use 0 to 16777215")), "{}", e);
    }

    #[test]
    fn addresses_are_written_in_their_std_text_form_and_read_back(
        local in any::<IpAddr>(),
        remotes in proptest::collection::vec(any::<IpAddr>(), 0..4),
        mac in any::<[u8; 6]>(),
        endpoint in (any::<IpAddr>(), any::<u16>()),
    ) {
        // What text can say: no IPv6 flow label or scope.
        let endpoint = SocketAddr::from(endpoint);
        let remote_macs = remotes.iter().map(|r| RemoteMac { mac: MacAddr(mac), remote: *r }).collect();
        let kind = vxlan(local, Vni::MAX, remotes.clone(), remote_macs);
        let json = serde_json::to_value(&kind).unwrap();
        prop_assert_eq!(&json["local"], &serde_json::Value::String(local.to_string()));
        for (i, r) in remotes.iter().enumerate() {
            prop_assert_eq!(&json["remotes"][i], &serde_json::Value::String(r.to_string()));
        }
        prop_assert_eq!(serde_json::from_value::<PortKind>(json).unwrap(), kind);
        for kind in [tcp_link(Some(endpoint), None), tcp_link(None, Some(endpoint))] {
            let json = serde_json::to_string(&kind).unwrap();
            prop_assert!(json.contains(&format!("\"{endpoint}\"")), "{}", json);
            prop_assert_eq!(serde_json::from_str::<PortKind>(&json).unwrap(), kind);
        }
    }
}

proptest! {
    #[test]
    fn rule_matches_are_written_as_given_and_read_back(
        addr in any::<[u8; 6]>(),
        mask in proptest::option::of(any::<[u8; 6]>()),
        ip in any::<IpAddr>(),
        len in proptest::option::of(0u8..=128),
    ) {
        let mac = MacPattern { addr: MacAddr(addr), mask: mask.map(MacAddr) };
        let len = len.map(|l| if ip.is_ipv4() { l % 33 } else { l });
        let prefix = IpPattern { addr: ip, len };
        let m = MatchSpec { src_mac: Some(mac), ip_dst: Some(prefix), ..MatchSpec::default() };
        let json = serde_json::to_value(&m).unwrap();
        let mac_text = match mask {
            None => MacAddr(addr).to_string(),
            Some(k) => format!("{}/{}", MacAddr(addr), MacAddr(k)),
        };
        let prefix_text = match len {
            None => ip.to_string(),
            Some(l) => format!("{ip}/{l}"),
        };
        prop_assert_eq!(&json["src_mac"], &serde_json::Value::String(mac_text));
        prop_assert_eq!(&json["ip_dst"], &serde_json::Value::String(prefix_text));
        prop_assert_eq!(serde_json::from_value::<MatchSpec>(json).unwrap(), m);
    }
}

/// The message of a request line that does not decode (as `invalid`, the kind a value that
/// is not acceptable has always had).
fn refusal(request: &str) -> String {
    let line = format!(r#"{{"version":1,"id":1,"request":{request}}}"#);
    let e = decode_request(line.as_bytes()).unwrap_err();
    assert_eq!(e.error.kind, ErrorKind::Invalid, "{}", e.error.message);
    assert_eq!(e.id, Some(1));
    e.error.message
}

#[test]
fn bad_addresses_are_refused_naming_the_field_and_the_value() {
    let port =
        |kind: &str| format!(r#"{{"op":"port_add","switch":"br0","name":"p","kind":{kind}}}"#);
    for (request, expected) in [
        (
            port(r#"{"type":"vxlan","local":"10.0.0.300","vni":1}"#),
            r#"local "10.0.0.300" is not an IP address"#,
        ),
        (
            port(r#"{"type":"vxlan","local":"10.0.0.1","vni":1,"remotes":["10.0.0.2","peer"]}"#),
            r#"remote "peer" is not an IP address"#,
        ),
        (
            port(r#"{"type":"vxlan","local":"10.0.0.1","vni":1,"remote_macs":[{"mac":"02:00:00:00:00:01","remote":"x"}]}"#),
            r#"remote "x" is not an IP address"#,
        ),
        (
            port(r#"{"type":"vxlan","local":"10.0.0.1","vni":1,"remote_macs":[{"mac":"02:00:00:00:01","remote":"10.0.0.2"}]}"#),
            r#"invalid MAC address "02:00:00:00:01""#,
        ),
        (
            port(r#"{"type":"vxlan","local":"10.0.0.1","vni":16777216}"#),
            "vni 16777216 is out of range: use 0 to 16777215 (24 bits)",
        ),
        (
            port(r#"{"type":"tcp_link","listen":"10.0.0.1"}"#),
            r#"listen "10.0.0.1" is not an IP:PORT address: give one such as 192.0.2.1:7000"#,
        ),
        (
            port(r#"{"type":"tcp_link","connect":"peer:7000"}"#),
            r#"connect "peer:7000" is not an IP:PORT address"#,
        ),
        (
            r#"{"op":"fdb_add","switch":"br0","mac":"02:00:00:00:00:zz","port":"p"}"#.into(),
            r#"invalid MAC address "02:00:00:00:00:zz": expected six hex pairs like 52:54:00:12:34:56"#,
        ),
        (
            r#"{"op":"remote_mac_add","switch":"br0","port":"vx","mac":"02:00:00:00:00:01","remote":"10.0.0"}"#.into(),
            r#"remote "10.0.0" is not an IP address: give an IPv4 or IPv6 address"#,
        ),
        (
            r#"{"op":"route_add","switch":"br0","rule":{"actions":["drop"]},"remote":"::g"}"#.into(),
            r#"remote "::g" is not an IP address"#,
        ),
        (
            r#"{"op":"rule_add","switch":"br0","rule":{"match":{"ip_dst":"10.0.0.0/33"},"actions":["drop"]}}"#.into(),
            r#"match.ip_dst: invalid IP prefix "10.0.0.0/33": the length is above 32"#,
        ),
        (
            r#"{"op":"rule_add","switch":"br0","rule":{"match":{"src_mac":"02:00:00:00:00:00/ff"},"actions":["drop"]}}"#.into(),
            r#"match.src_mac: invalid MAC address "ff""#,
        ),
    ] {
        let message = refusal(&request);
        assert!(message.contains(expected), "{request}: {message}");
    }
}

#[test]
fn a_state_file_written_with_other_spellings_reads_as_the_same_addresses() {
    // The protocol always took `-` and upper case in MACs and any std spelling of an IPv6
    // address; they now come back in the canonical form (the same addresses).
    let kind: PortKind = serde_json::from_str(
        r#"{"type":"vxlan","local":"2001:DB8:0:0::1","vni":5,"remotes":["2001:db8::0:2"],
            "remote_macs":[{"mac":"02-00-00-00-00-AB","remote":"2001:db8::2"}]}"#,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&kind).unwrap(),
        r#"{"type":"vxlan","local":"2001:db8::1","vni":5,"remotes":["2001:db8::2"],"learning":false,"remote_macs":[{"mac":"02:00:00:00:00:ab","remote":"2001:db8::2"}]}"#
    );
    let request = decode_request(
        br#"{"version":1,"id":1,"request":{"op":"fdb_del","switch":"br0","mac":"52:54:00:AB:CD:EF"}}"#,
    )
    .unwrap();
    assert!(
        matches!(request.request, Request::FdbDel { mac, .. } if mac.to_string() == "52:54:00:ab:cd:ef")
    );
}

#[test]
fn a_request_that_is_not_one_stays_a_bad_request_after_a_refused_value() {
    refusal(r#"{"op":"fdb_del","switch":"br0","mac":"nonsense"}"#);
    let e = decode_request(
        br#"{"version":1,"id":1,"request":{"op":"fdb_del","switch":"br0","mac":"02:00:00:00:00:01","extra":1}}"#,
    )
    .unwrap_err();
    assert_eq!(e.error.kind, ErrorKind::BadRequest, "{}", e.error.message);
}

#[test]
fn a_refused_value_in_a_configuration_names_its_switch_and_port() {
    let message = refusal(
        r#"{"op":"config_apply","state":{"switches":[
            {"name":"br0","ports":[{"name":"t0","kind":{"type":"tap"}}]},
            {"name":"br1","ports":[
                {"name":"t1","kind":{"type":"tap"}},
                {"name":"vx","kind":{"type":"vxlan","local":"10.0.0.300","vni":1}}]}]}}"#,
    );
    assert!(
        message.starts_with(r#"switch "br1": port "vx": local "10.0.0.300" is not an IP address"#),
        "{message}"
    );
    let static_mac = refusal(
        r#"{"op":"config_apply","state":{"switches":[
            {"name":"br0","static_macs":[{"mac":"02:00:00:00:00:zz","port":"t0"}]}]}}"#,
    );
    assert!(
        static_mac.starts_with(r#"switch "br0": invalid MAC address "02:00:00:00:00:zz""#),
        "{static_mac}"
    );
}

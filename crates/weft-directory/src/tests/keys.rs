use weft_packet::{MacAddr, Vni};

use crate::error::Refusal;
use crate::keys::{HostId, Key};
use crate::records::{MacClaim, VtepRecord};

const P: &str = "/weft/";

fn host(name: &str) -> HostId {
    HostId::new(name).unwrap()
}

#[test]
fn keys_render_and_parse_back() {
    let mac: MacAddr = "52:54:00:12:34:56".parse().unwrap();
    let keys = [
        Key::Vtep {
            vni: Vni::new(100).unwrap(),
            host: host("host-a.example"),
        },
        Key::Mac {
            vni: Vni::new(16_777_215).unwrap(),
            mac,
            host: host("b_2"),
        },
    ];
    for key in keys {
        let text = key.render(P);
        assert_eq!(Key::parse(P, text.as_bytes()), Ok(key));
    }
    assert_eq!(
        Key::Mac {
            vni: Vni::new(7).unwrap(),
            mac,
            host: host("h")
        }
        .render(P),
        "/weft/vni/7/mac/52:54:00:12:34:56/h"
    );
}

#[test]
fn keys_of_other_shapes_are_refused_with_a_reason() {
    let bad: &[(&str, Refusal)] = &[
        ("/other/vni/1/vtep/h", Refusal::MalformedKey),
        ("/weft/vni/1/vtep/h/extra", Refusal::MalformedKey),
        ("/weft/vni/01/vtep/h", Refusal::MalformedKey),
        ("/weft/vni/-1/vtep/h", Refusal::MalformedKey),
        ("/weft/vni/+1/vtep/h", Refusal::MalformedKey),
        ("/weft/vni/16777216/vtep/h", Refusal::WrongVni),
        ("/weft/vni/99999999/vtep/h", Refusal::WrongVni),
        ("/weft/vni/123456789/vtep/h", Refusal::MalformedKey),
        ("/weft/vni/1/vtep/", Refusal::MalformedKey),
        ("/weft/vni/1/vtep/..", Refusal::MalformedKey),
        ("/weft/vni/1/vtep/a b", Refusal::MalformedKey),
        ("/weft/vni/1/mac/52:54:00:12:34:5/h", Refusal::MalformedKey),
        ("/weft/vni/1/mac/52:54:00:12:34:5G/h", Refusal::MalformedKey),
        // One spelling per MAC: upper case would be a second key for the same MAC.
        ("/weft/vni/1/mac/52:54:00:12:34:AB/h", Refusal::MalformedKey),
        ("/weft/vni/1/mac/01:00:5e:00:00:01/h", Refusal::NotUnicast),
        ("/weft/vni/1/mac/ff:ff:ff:ff:ff:ff/h", Refusal::NotUnicast),
        ("/weft/vni/1/mac/00:00:00:00:00:00/h", Refusal::NotUnicast),
        ("/weft/vni/1/vlan/h", Refusal::MalformedKey),
    ];
    for (key, why) in bad {
        assert_eq!(Key::parse(P, key.as_bytes()), Err(*why), "{key}");
    }
    let long = format!("/weft/vni/1/vtep/{}", "h".repeat(65));
    assert_eq!(Key::parse(P, long.as_bytes()), Err(Refusal::MalformedKey));
    assert_eq!(
        Key::parse(P, b"/weft/vni/1/vtep/\xff"),
        Err(Refusal::MalformedKey)
    );
    assert_eq!(
        Key::parse(P, &vec![b'a'; 100_000]),
        Err(Refusal::MalformedKey)
    );
}

#[test]
fn values_are_exact_json_of_their_kind() {
    assert_eq!(
        VtepRecord::parse(br#"{"addr":"192.0.2.1","port":4789}"#),
        Ok(VtepRecord {
            addr: "192.0.2.1".parse().unwrap(),
            port: 4789
        })
    );
    assert_eq!(
        MacClaim::parse(br#"{"vtep":"2001:db8::1","seq":3}"#),
        Ok(MacClaim {
            vtep: "2001:db8::1".parse().unwrap(),
            seq: 3
        })
    );
    let bad: &[&[u8]] = &[
        b"",
        b"null",
        b"{}",
        br#"{"addr":"192.0.2.1","port":4789,"extra":1}"#,
        br#"{"addr":"192.0.2.1","port":0}"#,
        br#"{"addr":"0.0.0.0","port":4789}"#,
        br#"{"addr":"224.0.0.1","port":4789}"#,
        br#"{"addr":"255.255.255.255","port":4789}"#,
        br#"{"addr":"192.0.2.1","port":70000}"#,
        br#"{"addr":"not an address","port":4789}"#,
    ];
    for v in bad {
        assert_eq!(
            VtepRecord::parse(v),
            Err(Refusal::MalformedValue),
            "{}",
            String::from_utf8_lossy(v)
        );
    }
    assert_eq!(
        MacClaim::parse(br#"{"vtep":"192.0.2.1","seq":-1}"#),
        Err(Refusal::MalformedValue)
    );
    let huge = format!(r#"{{"vtep":"192.0.2.1","seq":1{}}}"#, " ".repeat(300));
    assert_eq!(
        MacClaim::parse(huge.as_bytes()),
        Err(Refusal::ValueTooLarge)
    );
}

proptest::proptest! {
    #[test]
    fn no_key_bytes_panic_the_parser(raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)) {
        let _ = Key::parse(P, &raw);
        let mut with_prefix = b"/weft/vni/".to_vec();
        with_prefix.extend_from_slice(&raw);
        let _ = Key::parse(P, &with_prefix);
        let _ = VtepRecord::parse(&raw);
        let _ = MacClaim::parse(&raw);
    }
}

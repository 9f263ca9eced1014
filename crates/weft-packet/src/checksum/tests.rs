use super::*;
use proptest::prelude::*;

/// Textbook RFC 1071 sum: 16-bit words into a u32, folded at the end.
fn naive_sum(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for pair in data.chunks(2) {
        let word = match pair {
            [hi, lo] => u16::from_be_bytes([*hi, *lo]),
            [hi] => u16::from_be_bytes([*hi, 0]),
            _ => 0,
        };
        acc += u32::from(word);
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
    }
    u16::try_from(acc).unwrap()
}

/// The two one's-complement zeros are the same number.
fn same_ones_complement(a: u16, b: u16) -> bool {
    a == b || (a | b == 0xffff && a & b == 0)
}

/// A buffer with a 16-bit checksum field at 0..2 (filled in) followed by `body`.
fn with_checksum(body: &[u8]) -> Vec<u8> {
    let mut buf = vec![0, 0];
    buf.extend_from_slice(body);
    let c = checksum(&buf);
    buf[..2].copy_from_slice(&c.to_be_bytes());
    buf
}

fn stored(buf: &[u8]) -> u16 {
    u16::from_be_bytes([buf[0], buf[1]])
}

fn recomputed(buf: &[u8]) -> u16 {
    let mut copy = buf.to_vec();
    copy[..2].fill(0);
    checksum(&copy)
}

#[test]
fn rfc1071_example_sums_to_ddf2() {
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(sum(&data), 0xddf2);
    assert_eq!(checksum(&data), 0x220d);
}

#[test]
fn odd_last_byte_is_padded_on_the_right() {
    assert_eq!(sum(&[0xab]), 0xab00);
    assert_eq!(sum(&[0x01, 0x02, 0x03]), 0x0402);
    assert_eq!(sum(&[]), 0);
}

#[test]
fn real_ipv4_header_verifies_and_ttl_update_matches_recompute() {
    let mut hdr = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    assert!(is_valid(&hdr));
    let old_word = u16::from_be_bytes([hdr[8], hdr[9]]);
    hdr[8] -= 1;
    let new_word = u16::from_be_bytes([hdr[8], hdr[9]]);
    let updated = update_u16(0xb861, old_word, new_word);
    hdr[10..12].fill(0);
    assert_eq!(updated, checksum(&hdr));
    assert_eq!(updated, 0xb961);
}

#[test]
fn fold_handles_carries_and_both_zeros() {
    assert_eq!(fold(0), 0);
    assert_eq!(fold(0xffff), 0xffff);
    assert_eq!(fold(0x1_0000), 1);
    assert_eq!(fold(0x1_fffe), 0xffff);
    assert_eq!(fold(u64::MAX), 0xffff);
    assert_eq!(combine(0xffff, 0xffff), 0xffff);
    assert_eq!(combine(0x8000, 0x8000), 1);
}

#[test]
fn all_ones_data_sums_to_ffff_not_zero() {
    for len in 1..40 {
        let data = vec![0xff; len * 2];
        assert_eq!(sum(&data), 0xffff, "len {len}");
    }
}

#[test]
fn pseudo_header_v4_equals_sum_of_its_bytes() {
    let src = Ipv4Addr::new(192, 168, 1, 10);
    let dst = Ipv4Addr::new(10, 255, 0, 3);
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&src.octets());
    bytes.extend_from_slice(&dst.octets());
    bytes.extend_from_slice(&[0, 17]);
    bytes.extend_from_slice(&1480u16.to_be_bytes());
    assert_eq!(pseudo_header_v4(src, dst, 17, 1480), sum(&bytes));
}

#[test]
fn pseudo_header_v6_equals_sum_of_its_bytes() {
    let src: Ipv6Addr = "fe80::1:ffff:abcd".parse().unwrap();
    let dst: Ipv6Addr = "2001:db8:ffff::ffff:1".parse().unwrap();
    let len: u32 = 0x0001_2345;
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&src.octets());
    bytes.extend_from_slice(&dst.octets());
    bytes.extend_from_slice(&len.to_be_bytes());
    bytes.extend_from_slice(&[0, 0, 0, 6]);
    assert_eq!(pseudo_header_v6(src, dst, 6, len), sum(&bytes));
}

#[test]
fn sum_of_super_frame_sized_buffers_equals_naive_in_every_lane_state() {
    // All ones drives every lane to its largest values; the odd lengths leave 1 to 31 bytes
    // after the last 32-byte step, so the tail path meets full lanes.
    let ones = vec![0xffu8; 65_600];
    let mut noise = vec![0u8; 65_600];
    let mut x: u32 = 0x1234_5678;
    for b in &mut noise {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        *b = x.to_be_bytes()[1];
    }
    for len in [65_536, 65_537, 65_535, 65_599, 65_568, 65_571] {
        assert_eq!(
            sum(&ones[..len]),
            naive_sum(&ones[..len]),
            "ones, {len} bytes"
        );
        assert_eq!(
            sum(&noise[..len]),
            naive_sum(&noise[..len]),
            "noise, {len} bytes"
        );
    }
}

proptest! {
    #[test]
    fn fast_sum_equals_naive_reference(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        prop_assert_eq!(sum(&data), naive_sum(&data));
    }

    #[test]
    fn fast_sum_equals_naive_on_mostly_ones(
        data in proptest::collection::vec(prop_oneof![Just(0xffu8), any::<u8>()], 0..300),
    ) {
        prop_assert_eq!(sum(&data), naive_sum(&data));
    }

    #[test]
    fn combine_at_any_split_equals_whole_sum(
        data in proptest::collection::vec(any::<u8>(), 0..300),
        split in any::<proptest::sample::Index>(),
    ) {
        let at = split.index(data.len() + 1);
        let (a, b) = data.split_at(at);
        prop_assert_eq!(combine_at(sum(a), sum(b), a.len()), sum(&data));
    }

    #[test]
    fn update_u16_equals_recomputation(
        body in proptest::collection::vec(any::<u8>(), 2..200),
        at in any::<proptest::sample::Index>(),
        new_word in any::<u16>(),
    ) {
        let mut buf = with_checksum(&body);
        let i = 2 + 2 * at.index((buf.len() - 2) / 2);
        prop_assume!(i + 2 <= buf.len());
        let old_word = u16::from_be_bytes([buf[i], buf[i + 1]]);
        buf[i..i + 2].copy_from_slice(&new_word.to_be_bytes());
        let updated = update_u16(stored(&buf), old_word, new_word);
        let fresh = recomputed(&buf);
        if buf[2..].iter().any(|&b| b != 0) {
            prop_assert_eq!(updated, fresh);
            buf[..2].copy_from_slice(&updated.to_be_bytes());
            prop_assert!(is_valid(&buf));
        } else {
            prop_assert!(same_ones_complement(updated, fresh));
        }
    }

    #[test]
    fn update_u32_equals_recomputation(
        body in proptest::collection::vec(any::<u8>(), 4..200),
        at in any::<proptest::sample::Index>(),
        new_field in any::<u32>(),
    ) {
        let mut buf = with_checksum(&body);
        let i = 2 + 2 * at.index((buf.len() - 4) / 2);
        prop_assume!(i + 4 <= buf.len());
        let old_field = u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        buf[i..i + 4].copy_from_slice(&new_field.to_be_bytes());
        let updated = update_u32(stored(&buf), old_field, new_field);
        let fresh = recomputed(&buf);
        if buf[2..].iter().any(|&b| b != 0) {
            prop_assert_eq!(updated, fresh);
        } else {
            prop_assert!(same_ones_complement(updated, fresh));
        }
    }

    #[test]
    fn update_bytes_equals_recomputation_for_an_ipv6_address(
        body in proptest::collection::vec(any::<u8>(), 16..120),
        at in any::<proptest::sample::Index>(),
        new_addr in any::<[u8; 16]>(),
    ) {
        let mut buf = with_checksum(&body);
        let i = 2 + 2 * at.index((buf.len() - 16) / 2);
        prop_assume!(i + 16 <= buf.len());
        let old_addr = buf[i..i + 16].to_vec();
        buf[i..i + 16].copy_from_slice(&new_addr);
        let updated = update_bytes(stored(&buf), &old_addr, &new_addr);
        let fresh = recomputed(&buf);
        if buf[2..].iter().any(|&b| b != 0) {
            prop_assert_eq!(updated, fresh);
        } else {
            prop_assert!(same_ones_complement(updated, fresh));
        }
    }
}

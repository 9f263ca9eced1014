use std::time::Duration;

use super::*;

fn valid() -> &'static str {
    r#"{"version":1,"switches":[{"name":"br0","rules":[{"actions":["drop"]}]}]}"#
}

#[test]
fn save_then_load_gives_the_same_state_and_leaves_no_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let state = parse(&path, valid().as_bytes()).unwrap();
    save(&path, &state).unwrap();
    assert_eq!(load(&path).unwrap(), Some(state));
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_missing_file_is_no_state() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(load(&dir.path().join("nope.json")).unwrap(), None);
}

#[test]
fn syntax_errors_name_the_file_and_the_line() {
    let p = Path::new("/x/state.json");
    let e = parse(p, b"{\n  \"version\": 1,\n  \"switches\": [,]\n}").unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("/x/state.json: line 3"), "{text}");
    let e = parse(p, b"{\"version\":1,\"switchez\":[]}").unwrap_err();
    assert!(e.to_string().contains("switchez"), "{e}");
    let e = parse(p, b"").unwrap_err();
    assert!(matches!(e, StateFileError::Syntax { .. }), "{e}");
}

#[test]
fn invalid_content_names_the_part_at_fault() {
    let p = Path::new("/x/state.json");
    let text =
        r#"{"version":1,"switches":[{"name":"br0","rules":[{"actions":[{"output":"vm9"}]}]}]}"#;
    let e = parse(p, text.as_bytes()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("switch \"br0\"") && msg.contains("rules[0]") && msg.contains("vm9"),
        "{msg}"
    );
}

#[test]
fn an_address_that_is_not_one_names_the_line_the_field_and_the_value() {
    let p = Path::new("/x/state.json");
    let text = "{\"version\":1,\"switches\":[{\"name\":\"br0\",\"ports\":[\n\
        {\"name\":\"vx\",\"kind\":{\"type\":\"vxlan\",\"local\":\"10.0.0.1\",\"vni\":1,\n\
        \"remote_macs\":[{\"mac\":\"02:00:00:00:00:01\",\"remote\":\"10.0.0.256\"}]}}]}]}";
    let msg = parse(p, text.as_bytes()).unwrap_err().to_string();
    assert!(
        msg.starts_with("/x/state.json: line 3")
            && msg.contains(r#"remote "10.0.0.256" is not an IP address"#),
        "{msg}"
    );
}

#[test]
fn recorded_state_file_loads_and_saves_back_the_same_bytes() {
    let recorded = include_str!("../../../weft-control/tests/fixtures/state.json");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let state = parse(&path, recorded.as_bytes()).unwrap();
    save(&path, &state).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), recorded);
}

#[test]
fn move_aside_keeps_every_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    fs::write(&path, "garbage").unwrap();
    let a = move_aside(&path, "corrupt").unwrap();
    fs::write(&path, "garbage 2").unwrap();
    let b = move_aside(&path, "corrupt").unwrap();
    assert_ne!(a, b);
    assert_eq!(fs::read_to_string(a).unwrap(), "garbage");
    assert_eq!(fs::read_to_string(&b).unwrap(), "garbage 2");
    assert!(b.to_string_lossy().contains("state.json.corrupt-"));
    assert!(!path.exists());
}

#[test]
fn utc_stamps_are_calendar_dates() {
    assert_eq!(utc_stamp(UNIX_EPOCH), "19700101T000000Z");
    let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661); // 2000-02-29 01:01:01
    assert_eq!(utc_stamp(t), "20000229T010101Z");
    let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599); // 2024-12-31 23:59:59
    assert_eq!(utc_stamp(t), "20241231T235959Z");
}

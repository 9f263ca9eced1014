use super::*;

fn err(text: &str) -> String {
    Config::parse(text).unwrap_err().to_string()
}

#[test]
fn empty_file_is_the_embedded_default() {
    let c = Config::parse("").unwrap();
    assert_eq!(c.switches.len(), 1);
    assert_eq!(c.switches[0].get_ref().name, "br0");
    assert_eq!(c.control.socket_mode, SocketMode(0o600));
    assert_eq!(c.control.max_clients.get(), 32);
    assert_eq!(c.metrics.listen, "127.0.0.1:9490".parse().unwrap());
    assert_eq!(c.workers.count.get(), 1);
}

#[test]
fn the_sample_config_in_docs_parses() {
    let text = include_str!("../../../../docs/weftd.toml");
    let c = Config::parse(text).unwrap_or_else(|e| panic!("docs/weftd.toml: {e}"));
    assert_eq!(c.switches[0].get_ref().name, "br0");
}

/// The sample's commented-out port, its TOML lines uncommented, is a port with every
/// policy on: the documented keys are the ones weftd reads.
#[test]
fn the_sample_configs_port_policy_example_parses() {
    let text = include_str!("../../../../docs/weftd.toml");
    let start = text.find("# [[switch.ports]]").expect("the port example");
    let mut example = String::from("[[switch]]\nname = \"br0\"\n");
    for line in text[start..].lines() {
        let Some(body) = line.strip_prefix("# ") else {
            break;
        };
        let key = body.split(" = ").next().unwrap_or("");
        let is_toml = body.starts_with('[')
            || (body.contains(" = ") && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        if is_toml {
            example.push_str(body);
            example.push('\n');
        }
    }
    let c = Config::parse(&example).unwrap_or_else(|e| panic!("{e}\n{example}"));
    let o = &c.switches[0].get_ref().ports[0].options;
    assert!(o.security.is_enabled(), "{example}");
    assert!(o.storm.is_enabled());
    assert_eq!(o.mac_limit.map(|l| l.max), Some(4));
}

#[test]
fn unknown_keys_are_reported_with_line_and_what_is_expected() {
    let e = err("[control]\nmax_client = 3\n");
    assert!(e.contains("line 2"), "{e}");
    assert!(e.contains("max_client"), "{e}");
    assert!(e.contains("max_clients"), "lists the expected keys: {e}");
    let e = err("[metric]\nenabled = false\n");
    assert!(e.contains("line 1") && e.contains("metrics"), "{e}");
}

#[test]
fn values_out_of_range_are_reported_with_line_and_range() {
    let e = err("[control]\n\nmax_clients = 0\n");
    assert!(e.contains("line 3"), "{e}");
    assert!(e.contains("1 to 1024"), "{e}");
    let e = err("[workers]\ncount = 65\n");
    assert!(e.contains("line 2") && e.contains("1 to 64"), "{e}");
}

#[test]
fn decimal_socket_mode_is_refused_with_the_octal_form() {
    let e = err("[control]\nsocket_mode = 600\n");
    assert!(e.contains("0o600"), "{e}");
    assert!(Config::parse("[control]\nsocket_mode = 0o660\n").is_ok());
    let e = err("[control]\nsocket_mode = 0o066\n");
    assert!(e.contains("owner"), "{e}");
}

#[test]
fn wrong_types_and_syntax_errors_say_where() {
    let e = err("[metrics]\nlisten = 9490\n");
    assert!(e.contains("line 2"), "{e}");
    let e = err("[metrics\n");
    assert!(e.contains("line 1"), "{e}");
    let e = err("[workers]\nidle = \"spin\"\n");
    assert!(e.contains("line 2") && e.contains("adaptive"), "{e}");
}

#[test]
fn cpus_must_match_the_worker_count() {
    let e = err("[workers]\ncount = 2\ncpus = [0]\n");
    assert!(
        e.contains("line 3") && e.contains("one CPU per worker"),
        "{e}"
    );
    assert!(Config::parse("[workers]\ncount = 2\ncpus = [0, 1]\n").is_ok());
}

#[test]
fn seed_switches_are_validated_and_located() {
    let e = err("[[switch]]\nname = \"br0\"\n\n[[switch]]\nname = \"bad name\"\n");
    assert!(
        e.contains("line 4") && e.contains("invalid switch name"),
        "{e}"
    );
    let e = err("[[switch]]\nname = \"a\"\n[[switch]]\nname = \"a\"\n");
    assert!(e.contains("twice"), "{e}");
    let c = Config::parse("switch = []\n").unwrap();
    assert!(c.switches.is_empty(), "no switch at all is allowed");
    let e = err("[[switch]]\nname = \"a\"\ncolour = 1\n");
    assert!(e.contains("colour") && e.contains("line 3"), "{e}");
}

#[test]
fn unknown_group_is_refused_with_a_hint() {
    let e = err("[control]\nsocket_group = \"no-such-group-weft\"\n");
    assert!(e.contains("no group") && e.contains("line 2"), "{e}");
}

#[test]
fn line_col_counts_from_one() {
    assert_eq!(line_col("ab\ncd", 0), (1, 1));
    assert_eq!(line_col("ab\ncd", 4), (2, 2));
    assert_eq!(line_col("ab", 99), (1, 3));
}

#[test]
fn vhost_guest_memory_limit_is_in_gib_and_defaults_to_one_tib() {
    let c = Config::parse("").unwrap();
    assert_eq!(c.vhost.max_guest_memory_gib.0 << 30, 1 << 40);
    let c = Config::parse("[vhost]\nmax_guest_memory_gib = 4096\n").unwrap();
    assert_eq!(c.vhost.max_guest_memory_gib.0, 4096);
    let e = err("[vhost]\nmax_guest_memory_gib = 0\n");
    assert!(e.contains("line 2") && e.contains("1 to 131072"), "{e}");
}

#[test]
fn guest_memory_is_lent_unless_the_configuration_says_copy() {
    assert!(Config::parse("").unwrap().vhost.lend_guest_memory);
    let c = Config::parse("[vhost]\nlend_guest_memory = false\n").unwrap();
    assert!(!c.vhost.lend_guest_memory);
}

#[test]
fn vhost_socket_dirs_are_plain_absolute_paths() {
    let c = Config::parse("vhost_socket_dirs = [\"/run/qemu\"]\n").unwrap();
    assert_eq!(c.vhost_socket_dirs, [PathBuf::from("/run/qemu")]);
    assert!(Config::parse("").unwrap().vhost_socket_dirs.is_empty());
    for bad in ["run/qemu", "/run/../etc", "/run//qemu", "/run/./qemu"] {
        let e = err(&format!("vhost_socket_dirs = [{bad:?}]\n"));
        assert!(e.contains("vhost_socket_dirs"), "{e}");
        assert!(e.contains(bad), "{e}");
    }
}

#[test]
fn a_directory_table_is_read_with_its_defaults_and_bad_values_say_where() {
    let c =
        Config::parse("[directory]\nendpoints = [\"http://192.0.2.10:2379\"]\nhost = \"hv1\"\n")
            .unwrap();
    let d = c.directory.expect("a directory");
    let client = d.client_config().unwrap();
    assert_eq!(client.prefix, "/weft/");
    assert_eq!(client.host.as_str(), "hv1");
    assert_eq!(client.lease_ttl, std::time::Duration::from_secs(30));
    assert!(client.tls.is_none() && client.user.is_none());
    assert!(Config::parse("").unwrap().directory.is_none());

    let e = err("[directory]\nendpoints = []\n");
    assert!(e.contains("line 2") && e.contains("1 to 16"), "{e}");
    let e = err("[directory]\nendpoints = [\"192.0.2.10:2379\"]\n");
    assert!(e.contains("http://HOST:PORT"), "{e}");
    let e = err("[directory]\nendpoints = [\"http://a:1\"]\nprefix = \"weft\"\n");
    assert!(e.contains("line 3") && e.contains("'/'"), "{e}");
    let e = err("[directory]\nendpoints = [\"http://a:1\"]\nhost = \"a b\"\n");
    assert!(e.contains("line 3") && e.contains("letters"), "{e}");
    let e = err("[directory]\nendpoints = [\"http://a:1\"]\nlease_ttl_secs = 1\n");
    assert!(e.contains("2 to 3600"), "{e}");
    let e = err("[directory]\nendpoint = [\"http://a:1\"]\n");
    assert!(e.contains("endpoints"), "{e}");
    let mixed =
        Config::parse("[directory]\nendpoints = [\"http://a:1\", \"https://b:1\"]\nhost = \"h\"\n")
            .unwrap();
    assert!(mixed
        .directory
        .unwrap()
        .client_config()
        .unwrap_err()
        .contains("mix"));
    let lonely =
        Config::parse("[directory]\nendpoints = [\"http://a:1\"]\nhost = \"h\"\nuser = \"u\"\n")
            .unwrap();
    assert!(lonely
        .directory
        .unwrap()
        .client_config()
        .unwrap_err()
        .contains("together"));
}

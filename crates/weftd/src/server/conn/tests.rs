use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

/// A connection that hands out scripted reads (bytes, or a timeout) and keeps writes.
#[derive(Default)]
struct Script {
    reads: VecDeque<Option<Vec<u8>>>,
    written: Vec<u8>,
}

impl Read for Script {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.reads.pop_front() {
            None => Ok(0),
            Some(None) => Err(io::Error::new(io::ErrorKind::WouldBlock, "timeout")),
            Some(Some(mut bytes)) => {
                let n = bytes.len().min(buf.len());
                buf[..n].copy_from_slice(&bytes[..n]);
                if n < bytes.len() {
                    self.reads.push_front(Some(bytes.split_off(n)));
                }
                Ok(n)
            }
        }
    }
}

impl Write for Script {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Conn for Script {
    fn set_read_timeout(&self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

fn script(reads: &[Option<&[u8]>]) -> Script {
    Script {
        reads: reads.iter().map(|r| r.map(<[u8]>::to_vec)).collect(),
        written: Vec::new(),
    }
}

fn later() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

#[test]
fn lines_split_across_reads_and_pipelined_lines_come_out_one_by_one() {
    let mut conn = script(&[Some(b"ab"), Some(b"c\nde"), Some(b"f\ng")]);
    let mut r = LineReader::new(100);
    assert_eq!(
        r.next_line(&mut conn, later()).unwrap(),
        Line::Complete(b"abc".to_vec())
    );
    assert_eq!(
        r.next_line(&mut conn, later()).unwrap(),
        Line::Complete(b"def".to_vec())
    );
    assert_eq!(
        r.next_line(&mut conn, later()).unwrap(),
        Line::Unterminated(b"g".to_vec())
    );
    assert_eq!(r.next_line(&mut conn, later()).unwrap(), Line::Closed);
}

#[test]
fn a_line_at_the_limit_passes_one_byte_more_is_too_long() {
    let mut ok = vec![b'x'; 9];
    ok.push(b'\n');
    let mut conn = script(&[Some(&ok)]);
    assert_eq!(
        LineReader::new(10).next_line(&mut conn, later()).unwrap(),
        Line::Complete(vec![b'x'; 9])
    );
    let mut long = vec![b'x'; 10];
    long.push(b'\n');
    let mut conn = script(&[Some(&long)]);
    assert_eq!(
        LineReader::new(10).next_line(&mut conn, later()).unwrap(),
        Line::TooLong
    );
    let endless = vec![b'x'; 1000];
    let mut conn = script(&[Some(&endless)]);
    assert_eq!(
        LineReader::new(10).next_line(&mut conn, later()).unwrap(),
        Line::TooLong
    );
}

#[test]
fn silence_and_passed_deadlines_time_out() {
    let mut conn = script(&[Some(b"{\"ver"), None]);
    let mut r = LineReader::new(100);
    assert_eq!(r.next_line(&mut conn, later()).unwrap(), Line::TimedOut);
    let mut conn = script(&[Some(b"x\n")]);
    assert_eq!(
        LineReader::new(100)
            .next_line(&mut conn, Instant::now())
            .unwrap(),
        Line::TimedOut
    );
}

proptest! {
    #[test]
    fn lines_come_out_as_sent_however_the_bytes_are_cut(
        lines in proptest::collection::vec(proptest::collection::vec(0u8..255, 0..40), 0..8),
        cuts in proptest::collection::vec(1usize..30, 1..20),
    ) {
        let lines: Vec<Vec<u8>> = lines.into_iter().map(|l| l.into_iter().filter(|b| *b != b'\n').collect()).collect();
        let mut bytes = Vec::new();
        for l in &lines {
            bytes.extend_from_slice(l);
            bytes.push(b'\n');
        }
        let mut reads = VecDeque::new();
        let mut rest = &bytes[..];
        for c in cuts.iter().cycle() {
            if rest.is_empty() { break; }
            let n = (*c).min(rest.len());
            reads.push_back(Some(rest[..n].to_vec()));
            rest = &rest[n..];
        }
        let mut conn = Script { reads, written: Vec::new() };
        let mut r = LineReader::new(64);
        for l in &lines {
            prop_assert_eq!(r.next_line(&mut conn, later()).unwrap(), Line::Complete(l.clone()));
        }
        prop_assert_eq!(r.next_line(&mut conn, later()).unwrap(), Line::Closed);
    }
}

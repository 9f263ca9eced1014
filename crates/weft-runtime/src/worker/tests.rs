use std::time::Duration;

use weft_packet::MacAddr;
use weft_switch::memory_port::memory_port;
use weft_switch::{PortCaps, PortOptions, SwitchConfig};

use super::*;

fn frame(dst: MacAddr, src: MacAddr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f
}

fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

#[test]
fn worker_forwards_traffic_of_the_switches_it_was_given() {
    let w = spawn_worker(WorkerConfig::default()).unwrap();
    let (rx0, tx0, h0) = memory_port(PortCaps::plain(1500), 64);
    let (rx1, tx1, h1) = memory_port(PortCaps::plain(1500), 64);
    w.exec(move |reg, _| {
        reg.create("br0", SwitchConfig::default()).unwrap();
        reg.add_port(
            "br0:a",
            Some(Box::new(rx0)),
            Box::new(tx0),
            PortOptions::default(),
        )
        .unwrap();
        reg.add_port(
            "br0:b",
            Some(Box::new(rx1)),
            Box::new(tx1),
            PortOptions::default(),
        )
        .unwrap();
    })
    .unwrap();
    for _ in 0..10 {
        assert!(h0.inject(&frame(MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 0, 1]))));
    }
    let mut got = 0;
    assert!(wait_for(|| {
        got += h1.take_sent().len();
        got == 10
    }));
    let stats = w.stats();
    assert_eq!(stats.packets, 10);
    assert!(stats.busy_passes >= 1 && stats.busy_ns > 0);
    let fdb = w
        .exec(|reg, _| reg.get("br0").map(|s| s.fdb().len()))
        .unwrap();
    assert_eq!(fdb, Some(1));
    drop(h1);
}

#[test]
fn an_idle_worker_sleeps_and_still_answers_jobs_promptly() {
    let w = spawn_worker(WorkerConfig {
        idle: IdleStrategy::Adaptive {
            spin: Duration::from_micros(10),
            max_sleep: Duration::from_millis(200),
        },
        ..WorkerConfig::default()
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    assert_eq!(w.exec(|_, _| 7).unwrap(), 7);
    assert!(
        start.elapsed() < Duration::from_millis(150),
        "woken by the eventfd, not the timeout"
    );
    let s = w.stats();
    assert!(s.busy_fraction() < 0.5);
}

#[test]
fn switches_move_between_workers() {
    let a = spawn_worker(WorkerConfig {
        index: 0,
        ..WorkerConfig::default()
    })
    .unwrap();
    let b = spawn_worker(WorkerConfig {
        index: 1,
        ..WorkerConfig::default()
    })
    .unwrap();
    a.exec(|reg, _| reg.create("sw", SwitchConfig::default()).map(|_| ()))
        .unwrap()
        .unwrap();
    let sw = a.exec(|reg, _| reg.take("sw")).unwrap().unwrap();
    b.exec(move |reg, _| reg.insert(sw)).unwrap().unwrap();
    assert!(b.exec(|reg, _| reg.get("sw").is_some()).unwrap());
    let reg = b.shutdown().unwrap();
    assert!(reg.get("sw").is_some(), "shutdown gives the switches back");
    assert!(a.exec(|reg, _| reg.is_empty()).unwrap());
}

#[test]
fn pinning_to_an_impossible_cpu_is_an_error_not_a_crash() {
    assert!(pin_to(usize::MAX).is_err());
    let w = spawn_worker(WorkerConfig {
        cpu: Some(100_000),
        ..WorkerConfig::default()
    })
    .unwrap();
    assert_eq!(w.exec(|_, _| 1).unwrap(), 1);
}

#[test]
fn a_stopped_worker_answers_stopped_not_a_hang() {
    let w = spawn_worker(WorkerConfig::default()).unwrap();
    let r = w.exec(|_, _| panic!("a job that kills the worker"));
    assert_eq!(r, Err(WorkerGone::Stopped));
    assert_eq!(w.exec(|_, _| 1), Err(WorkerGone::Stopped));
}

/// A port that has no readiness descriptor to wake a sleeping worker, and says (or not)
/// that it must be polled.
struct PolledPort {
    inner: weft_switch::memory_port::MemoryRx,
    needs_polling: bool,
}

impl weft_switch::PortRx for PolledPort {
    fn receive(&mut self, batch: &mut weft_switch::RxBatch) {
        self.inner.receive(batch);
    }
    fn frame(&self, handle: weft_switch::FrameHandle) -> weft_switch::RxFrame<'_> {
        self.inner.frame(handle)
    }
    fn finish(&mut self) {
        self.inner.finish();
    }
    fn needs_polling(&self) -> bool {
        self.needs_polling
    }
}

/// How long a frame injected into an idle worker's port takes to come out, with the port
/// asking to be polled or not, while the worker's idle sleeps are a second long.
fn idle_latency(needs_polling: bool) -> Duration {
    let w = spawn_worker(WorkerConfig {
        idle: IdleStrategy::Sleep(Duration::from_secs(1)),
        ..WorkerConfig::default()
    })
    .unwrap();
    let (rx0, tx0, h0) = memory_port(PortCaps::plain(1500), 64);
    let (rx1, tx1, h1) = memory_port(PortCaps::plain(1500), 64);
    w.exec(move |reg, _| {
        reg.create("br0", SwitchConfig::default()).unwrap();
        let rx0 = PolledPort {
            inner: rx0,
            needs_polling,
        };
        reg.add_port(
            "br0:a",
            Some(Box::new(rx0)),
            Box::new(tx0),
            PortOptions::default(),
        )
        .unwrap();
        reg.add_port(
            "br0:b",
            Some(Box::new(rx1)),
            Box::new(tx1),
            PortOptions::default(),
        )
        .unwrap();
    })
    .unwrap();
    // Let the worker go idle (and, without the hint, into its long sleep).
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    assert!(h0.inject(&frame(MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 0, 1]))));
    assert!(wait_for(|| !h1.take_sent().is_empty()));
    start.elapsed()
}

#[test]
fn a_port_that_needs_polling_keeps_an_idle_worker_from_sleeping_on_it() {
    assert!(
        idle_latency(true) < Duration::from_millis(300),
        "polled, not slept on"
    );
    assert!(
        idle_latency(false) >= Duration::from_millis(300),
        "without the hint the worker sleeps through"
    );
}

#[test]
fn a_paused_worker_moves_no_frame_until_resumed_and_then_moves_them_all() {
    let w = spawn_worker(WorkerConfig::default()).unwrap();
    let (rx0, tx0, h0) = memory_port(PortCaps::plain(1500), 64);
    let (rx1, tx1, h1) = memory_port(PortCaps::plain(1500), 64);
    w.exec(move |reg, _| {
        reg.create("br0", SwitchConfig::default()).unwrap();
        reg.add_port(
            "br0:a",
            Some(Box::new(rx0)),
            Box::new(tx0),
            PortOptions::default(),
        )
        .unwrap();
        reg.add_port(
            "br0:b",
            Some(Box::new(rx1)),
            Box::new(tx1),
            PortOptions::default(),
        )
        .unwrap();
    })
    .unwrap();
    let (ports, paused) = w
        .pause_with(Duration::from_secs(30), |reg, _| {
            reg.get("br0").map(|s| s.fdb().len())
        })
        .unwrap();
    assert_eq!(ports, Some(0), "the job ran before the hold");
    for _ in 0..5 {
        assert!(h0.inject(&frame(MacAddr::BROADCAST, MacAddr([2, 0, 0, 0, 0, 1]))));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(h1.take_sent().is_empty(), "a paused worker forwarded");
    assert_eq!(h0.pending_rx(), 5);
    paused.resume();
    let mut got = 0;
    assert!(wait_for(|| {
        got += h1.take_sent().len();
        got == 5
    }));
}

#[test]
fn a_pause_ends_when_its_holder_is_dropped_or_its_deadline_passes() {
    let w = spawn_worker(WorkerConfig::default()).unwrap();
    let ((), paused) = w.pause_with(Duration::from_secs(30), |_, _| ()).unwrap();
    drop(paused);
    assert!(w.exec(|_, _| ()).is_ok(), "dropping the holder resumes");
    let ((), paused) = w.pause_with(Duration::from_millis(50), |_, _| ()).unwrap();
    let start = Instant::now();
    assert!(w.exec(|_, _| ()).is_ok(), "the deadline resumes");
    assert!(start.elapsed() < Duration::from_secs(5));
    drop(paused);
}

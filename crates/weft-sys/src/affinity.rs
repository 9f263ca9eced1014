//! CPU affinity of the calling thread (nix's `sched_setaffinity`).

use std::io;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// Pins the calling thread to `cpu`. `InvalidInput` for a CPU number past what a CPU set
/// holds; the kernel's error (`EINVAL`) for a CPU the thread may not run on.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "CPU number out of range"))?;
    // Pid 0: the calling thread.
    sched_setaffinity(Pid::from_raw(0), &set)?;
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0))?;
    Ok((0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pins_to_an_allowed_cpu() {
        std::thread::spawn(|| {
            let allowed = allowed_cpus().unwrap();
            let cpu = *allowed.last().unwrap();
            pin_to(cpu).unwrap();
            assert_eq!(allowed_cpus().unwrap(), [cpu]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cpu_the_machine_lacks_is_refused() {
        std::thread::spawn(|| {
            let before = allowed_cpus().unwrap();
            let absent = CpuSet::count() - 1;
            assert!(!before.contains(&absent));
            assert!(pin_to(absent).is_err());
            assert_eq!(allowed_cpus().unwrap(), before);
            let e = pin_to(CpuSet::count()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        })
        .join()
        .unwrap();
    }
}

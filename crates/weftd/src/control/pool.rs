//! The worker threads and which switch each runs.
//!
//! Each switch is owned by exactly one worker. The control plane reaches a switch only by
//! sending a closure to its worker ([`WorkerPool::on_switch`]), which runs it between two
//! batches; the worker never waits for the control plane.

use std::time::Duration;

use weft_control::ControlError;
use weft_runtime::{spawn_worker, IdleStrategy, WorkerConfig, WorkerHandle, WorkerStats};
use weft_switch::{Switch, SwitchRegistry, Timestamp};

use crate::config::{IdleMode, WorkersConfig};

/// The workers.
pub struct WorkerPool {
    workers: Vec<WorkerHandle>,
}

fn gone(index: usize) -> ControlError {
    ControlError::new(
        weft_control::ErrorKind::Internal,
        format!("worker {index} has stopped"),
    )
    .with_hint("this is a bug in weftd: see its log, and restart it")
}

/// The runtime's idle strategy for a configuration.
pub fn idle_strategy(config: &WorkersConfig) -> IdleStrategy {
    let sleep = Duration::from_micros(config.sleep_us.0);
    match config.idle {
        IdleMode::Poll => IdleStrategy::Poll,
        IdleMode::Sleep => IdleStrategy::Sleep(sleep),
        IdleMode::Adaptive => IdleStrategy::Adaptive {
            spin: Duration::from_micros(config.spin_us.0),
            max_sleep: sleep,
        },
    }
}

impl WorkerPool {
    /// Starts the configured workers, pinned as configured.
    pub fn start(config: &WorkersConfig) -> std::io::Result<WorkerPool> {
        let idle = idle_strategy(config);
        let cpus = config.cpus.get_ref();
        let workers = (0..config.count.get())
            .map(|index| {
                spawn_worker(WorkerConfig {
                    index,
                    cpu: cpus.get(index).copied(),
                    idle,
                })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(WorkerPool { workers })
    }

    /// Number of workers.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// True when there is none (never, once started).
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Runs `f` on worker `index`, between two of its batches.
    pub fn exec<R: Send + 'static>(
        &self,
        index: usize,
        f: impl FnOnce(&mut SwitchRegistry, Timestamp) -> R + Send + 'static,
    ) -> Result<R, ControlError> {
        let worker = self.workers.get(index).ok_or_else(|| gone(index))?;
        worker.exec(f).map_err(|e| match e {
            weft_runtime::WorkerGone::Stopped => gone(index),
            weft_runtime::WorkerGone::Stuck => ControlError::new(
                weft_control::ErrorKind::Internal,
                format!("worker {index} did not answer: {e}"),
            )
            .with_hint("a worker stuck in a batch is a bug in weftd or a port: see its log"),
        })
    }

    /// Runs `f` on worker `index` between two batches, then holds the worker there until
    /// the hold is resumed or dropped, or `max` passes.
    pub fn pause_with<R: Send + 'static>(
        &self,
        index: usize,
        max: Duration,
        f: impl FnOnce(&mut SwitchRegistry, Timestamp) -> R + Send + 'static,
    ) -> Result<(R, weft_runtime::PausedWorker), ControlError> {
        let worker = self.workers.get(index).ok_or_else(|| gone(index))?;
        worker.pause_with(max, f).map_err(|e| {
            ControlError::new(
                weft_control::ErrorKind::Internal,
                format!("worker {index} could not be held: {e}"),
            )
        })
    }

    /// Runs `f` on switch `name`, which worker `index` owns.
    pub fn on_switch<R: Send + 'static>(
        &self,
        index: usize,
        name: &str,
        f: impl FnOnce(&mut Switch, Timestamp) -> R + Send + 'static,
    ) -> Result<R, ControlError> {
        let owned = name.to_string();
        self.exec(index, move |reg, now| {
            reg.get_mut(&owned).map(|sw| f(sw, now))
        })?
        .ok_or_else(|| {
            ControlError::new(
                weft_control::ErrorKind::Internal,
                format!("switch {name:?} is missing from worker {index}"),
            )
        })
    }

    /// Runs `f` on every lane of switch `name` (lane `i` on `workers[i]`), in lane order,
    /// and returns each lane's result. The control plane makes every change this way, so
    /// the lanes see the same changes in the same order (and give ports the same ids).
    pub fn on_lanes<R: Send + 'static>(
        &self,
        workers: &[usize],
        name: &str,
        f: impl Fn(&mut Switch, Timestamp) -> R + Clone + Send + 'static,
    ) -> Result<Vec<R>, ControlError> {
        workers
            .iter()
            .map(|&worker| self.on_switch(worker, name, f.clone()))
            .collect()
    }

    /// A worker's counters and CPU.
    pub fn stats(&self, index: usize) -> Option<(WorkerStats, Option<usize>)> {
        self.workers.get(index).map(|w| (w.stats(), w.cpu()))
    }

    /// Stops every worker, dropping their switches (and so closing their devices).
    pub fn shutdown(&mut self) {
        for w in self.workers.drain(..) {
            let _ = w.shutdown();
        }
    }
}

/// `count` distinct workers for the lanes of a new switch, least loaded first (lower index
/// among equals); fewer when there are fewer workers.
pub fn least_loaded_n(loads: &[usize], count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..loads.len()).collect();
    order.sort_by_key(|&i| (loads[i], i));
    order.truncate(count);
    order
}

/// The worker with the least load (the lowest index among equals).
pub fn least_loaded(loads: &[usize]) -> usize {
    loads
        .iter()
        .enumerate()
        .min_by_key(|(i, l)| (**l, *i))
        .map_or(0, |(i, _)| i)
}

/// Moves that even out the load: each moves one switch from the most to the least loaded
/// worker, and only when that lowers the higher of the two loads. `switches` lists (name,
/// worker, weight) of the switches that may move; `fixed` the load already on each worker
/// that stays (lanes of switches that run on several). Returns (name, from, to) in the
/// order to make them.
pub fn plan_moves(
    switches: &[(String, usize, usize)],
    fixed: &[usize],
    workers: usize,
) -> Vec<(String, usize, usize)> {
    let mut placed: Vec<(String, usize, usize)> = switches.to_vec();
    let mut loads: Vec<usize> = (0..workers)
        .map(|w| fixed.get(w).copied().unwrap_or(0))
        .collect();
    for (_, w, weight) in &placed {
        if let Some(l) = loads.get_mut(*w) {
            *l += weight;
        }
    }
    let mut moves = Vec::new();
    // Each move strictly lowers the sum of squared loads, so this ends; the bound is a guard.
    for _ in 0..switches.len() * workers.max(1) {
        let hi_load = loads.iter().copied().max().unwrap_or(0);
        let lo = least_loaded(&loads);
        let lo_load = loads[lo];
        // The lightest switch on a busiest worker that, moved, lowers that worker's load
        // without making the least loaded one as busy.
        let candidate = placed
            .iter_mut()
            .filter(|(_, w, weight)| loads.get(*w) == Some(&hi_load) && lo_load + weight < hi_load)
            .min_by_key(|(name, w, weight)| (*weight, *w, name.clone()));
        let Some(entry) = candidate else { break };
        let hi = entry.1;
        entry.1 = lo;
        loads[hi] -= entry.2;
        loads[lo] += entry.2;
        moves.push((entry.0.clone(), hi, lo));
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn loads(
        switches: &[(String, usize, usize)],
        moves: &[(String, usize, usize)],
        n: usize,
    ) -> Vec<usize> {
        let mut loads = vec![0; n];
        for (name, w, weight) in switches {
            let w = moves
                .iter()
                .rev()
                .find(|m| &m.0 == name)
                .map_or(*w, |m| m.2);
            loads[w] += weight;
        }
        loads
    }

    #[test]
    fn balanced_pools_stay_put() {
        let s = vec![("a".into(), 0, 1), ("b".into(), 1, 1)];
        assert!(plan_moves(&s, &[], 2).is_empty());
    }

    #[test]
    fn a_crowded_worker_hands_switches_to_an_empty_one() {
        let s = vec![("a".into(), 0, 1), ("b".into(), 0, 1), ("c".into(), 0, 1)];
        let moves = plan_moves(&s, &[], 2);
        assert_eq!(moves.len(), 1);
        assert_eq!(loads(&s, &moves, 2), vec![2, 1]);
    }

    proptest! {
        #[test]
        fn after_the_moves_no_single_move_helps(
            weights in proptest::collection::vec((0usize..4, 1usize..10), 0..20),
            workers in 1usize..5,
        ) {
            let s: Vec<_> = weights.iter().enumerate()
                .map(|(i, (w, weight))| (format!("s{i}"), w % workers, *weight)).collect();
            let moves = plan_moves(&s, &[], workers);
            let l = loads(&s, &moves, workers);
            let hi = *l.iter().max().unwrap_or(&0);
            let lo = *l.iter().min().unwrap_or(&0);
            // Every switch on a busiest worker would make the least loaded one at least as busy.
            for (name, w, weight) in &s {
                let w = moves.iter().rev().find(|m| &m.0 == name).map_or(*w, |m| m.2);
                if l[w] == hi {
                    prop_assert!(lo + weight >= hi);
                }
            }
            prop_assert_eq!(l.iter().sum::<usize>(), s.iter().map(|x| x.2).sum::<usize>());
        }
    }
}

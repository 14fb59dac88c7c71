//! Write-stall projections: when a background job will have finished if no more foreground work
//! arrives ([`Timeline::project_done`]), played on a copy of the timeline that is kept for the
//! next stall while it stays exact. The property tests here also check that playback does not
//! depend on how it is pumped, which is what makes a kept copy exact.

use super::{JobId, Lane};
use crate::timing::{SimTime, Timeline};

impl Timeline {
    /// When job `id` will have finished, playing the queue with no further foreground work (it
    /// may finish later in fact, if reads arrive meantime and take die time first).
    ///
    /// The projection plays a copy of the timeline until the job finishes, and the copy is kept:
    /// the next stall usually waits for the next flush, and plays on from where this one stopped
    /// instead of copying the timeline again and replaying the same window. A kept copy stays
    /// exact while nothing but the background thread books flash, the channels or its cores (the
    /// request thread's own computation does not touch them) and while every job recorded since
    /// starts after what the copy has played; otherwise it is dropped
    /// ([`Timeline::forget_projection`], [`Timeline::projection_takes`]).
    pub(crate) fn project_done(&mut self, id: JobId) -> SimTime {
        if let Some(at) = self.background.done_at(id) {
            return at;
        }
        // A kept copy that finished the job so long ago that it no longer remembers when cannot
        // answer; a fresh copy can.
        let kept = self
            .projection
            .take()
            .filter(|kept| kept.background.remembers(id));
        let mut played = match kept {
            Some(mut kept) => {
                // The kept copy may be behind this timeline or ahead of it: it forgets only what
                // its own playback can no longer meet.
                let from = kept
                    .background
                    .earliest_booking()
                    .min(kept.background.frontier);
                kept.advance_horizon(from);
                kept
            }
            None => Box::new(self.fresh_copy()),
        };
        let done = played.play_until_done(id);
        self.projection = Some(played);
        done
    }

    /// Plays this copy until job `id` finishes; returns when it does.
    fn play_until_done(&mut self, id: JobId) -> SimTime {
        if let Some(&at) = self.background.finished_at.get(&id) {
            return at;
        }
        self.background.watched = Some(id);
        self.background.watched_done = false;
        self.pump(SimTime::MAX);
        self.background.watched = None;
        self.background.watched_done = false;
        self.background
            .finished_at
            .get(&id)
            .copied()
            .unwrap_or(self.background.frontier)
    }

    /// A copy of this timeline to play a projection on.
    fn fresh_copy(&self) -> Timeline {
        // Everything ready by `until` has been issued (every pump plays to the clock), so the
        // copy books nothing earlier than `from`.
        let until = self.pump_limit(SimTime::MAX);
        let from = self.background.earliest_booking().min(until);
        self.copy_after(from)
    }

    /// A projection played on a fresh copy, whatever is kept: what [`Timeline::project_done`]
    /// must answer.
    #[cfg(test)]
    fn project_done_afresh(&self, id: JobId) -> SimTime {
        if let Some(at) = self.background.done_at(id) {
            return at;
        }
        self.fresh_copy().play_until_done(id)
    }

    /// Drops the kept projection: foreground work was booked where background work goes.
    pub(crate) fn forget_projection(&mut self) {
        self.projection = None;
    }

    /// Queues the job just recorded on `lane` on the kept projection too, or drops the
    /// projection if the job would start before what the copy has already played (then the copy
    /// played that window without it). A job of a lane that has finished its queue starts once
    /// the lane's last writes are issued, often at the very event the copy stopped on, so a start
    /// at the frontier's time counts as after it when the event order puts it there.
    pub(crate) fn projection_takes(&mut self, lane: Lane) {
        let Some(kept) = self.projection.as_mut() else {
            return;
        };
        let Some(job) = self.background.last_job(lane).cloned() else {
            return;
        };
        // Jobs that issued everything finish first, as the copy's next pump would (a kept copy
        // watches no job, so this never stops early).
        kept.settle_lanes();
        let state = &kept.background.lanes[lane as usize];
        let start = state.next_start(&job);
        let starts_later = (!state.jobs.is_empty()
            || kept.background.comes_after_played(start, lane as usize))
            // The timeline itself may have played events at that very time before the job was
            // recorded (a phase of this lane or of one after it in lane order, starting at the
            // clock): the copy, behind it, would play them after the job, in lane order.
            && self.background.comes_after_played(start, lane as usize);
        if starts_later && kept.background.next_id == job.id {
            kept.background.enqueue(lane, job);
        } else {
            self.projection = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{ControllerModel, TimingProfile};
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// A timeline of PinK's timing on four channels of two dies, run as the prototype runs.
    fn timeline() -> Timeline {
        let geometry = crate::Geometry {
            channels: 4,
            ways_per_channel: 2,
            ..crate::Profile::test_min().geometry
        };
        let timing = TimingProfile {
            controller: ControllerModel::Threads,
            ..TimingProfile::pink()
        };
        Timeline::new(timing, &geometry)
    }

    /// One step of a random schedule: a background job of some lane, foreground computation of
    /// the request thread, a foreground read, or a write stall on the oldest flush (`wait`: the
    /// schedule goes on after it; otherwise other clients go on meanwhile).
    #[derive(Debug, Clone)]
    enum Step {
        Job { lane: u8, work: Vec<(u8, u8)> },
        Compute { ns: u64 },
        Read { die: u8 },
        Stall { wait: bool },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0u8..3, prop::collection::vec((0u8..5, 0u8..8), 1..40))
                .prop_map(|(lane, work)| Step::Job { lane, work }),
            4 => (1u64..400_000).prop_map(|ns| Step::Compute { ns }),
            1 => (0u8..8).prop_map(|die| Step::Read { die }),
            2 => any::<bool>().prop_map(|wait| Step::Stall { wait }),
        ]
    }

    /// How [`play`] answers a stall.
    #[derive(Clone, Copy, PartialEq)]
    enum Projecting {
        /// On a fresh copy every time.
        Afresh,
        /// With the kept projection, checked against a fresh copy.
        Kept,
    }

    /// Plays `steps` on `timeline`, each issued `gap` after the one before, with the background
    /// also pumped at `cuts` evenly spaced points within each gap; returns every projection's
    /// answer and the time each job finished.
    fn play(
        timeline: &mut Timeline,
        steps: &[Step],
        gap: u64,
        cuts: u64,
        projecting: Projecting,
    ) -> Vec<SimTime> {
        let lanes = [Lane::Flush, Lane::Gc, Lane::Compaction];
        let mut answers = Vec::new();
        let mut flushes = VecDeque::new();
        let mut at: SimTime = 0;
        for step in steps {
            for cut in 1..=cuts {
                timeline.advance_clock(at + gap * cut / (cuts + 1));
            }
            at += gap;
            timeline.advance_clock(at);
            match step {
                Step::Job { lane, work } => {
                    let lane = lanes[usize::from(*lane)];
                    timeline.begin_background(at, lane);
                    for &(kind, die) in work {
                        let die = u32::from(die);
                        match kind {
                            0 => timeline.read(at, die, 8192),
                            1 | 2 => timeline.program(at, die, 8192),
                            3 => timeline.erase(at, die),
                            _ => timeline.cpu(at, 150_000),
                        };
                    }
                    if let Some(id) = timeline.end_background() {
                        if lane == Lane::Flush {
                            flushes.push_back(id);
                        }
                    }
                }
                Step::Compute { ns } => {
                    timeline.cpu(at, *ns);
                }
                Step::Read { die } => {
                    timeline.read(at, u32::from(*die), 8192);
                }
                Step::Stall { wait } => {
                    let Some(id) = flushes.pop_front() else {
                        continue;
                    };
                    let expected = timeline.project_done_afresh(id);
                    if projecting == Projecting::Kept {
                        assert_eq!(
                            timeline.project_done(id),
                            expected,
                            "kept projection of job {id}"
                        );
                    }
                    answers.push(expected);
                    if *wait {
                        at = at.max(expected);
                    }
                }
            }
        }
        timeline.pump(SimTime::MAX);
        let last = timeline.background.next_id;
        answers.extend((1..last).map(|id| timeline.background.done_at(id).unwrap_or(0)));
        answers
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// A projection kept and played on for the next stall answers what a fresh copy of the
        /// timeline answers, whatever foreground work and jobs came between.
        #[test]
        fn a_kept_projection_answers_as_a_fresh_one(
            steps in prop::collection::vec(step(), 1..80),
            gap in 1u64..2_000_000,
        ) {
            play(&mut timeline(), &steps, gap, 0, Projecting::Kept);
        }

        /// Playback does not depend on how it is cut into pumps: the same schedule played with
        /// the clock advanced in extra small steps finishes every job at the same time and
        /// projects every stall the same.
        #[test]
        fn playback_does_not_depend_on_pumps(
            steps in prop::collection::vec(step(), 1..80),
            gap in 1u64..2_000_000,
            cuts in 1u64..16,
        ) {
            let coarse = play(&mut timeline(), &steps, gap, 0, Projecting::Afresh);
            let fine = play(&mut timeline(), &steps, gap, cuts, Projecting::Afresh);
            prop_assert_eq!(coarse, fine);
        }
    }
}

//! The background thread of the controller on the simulated timeline: a user read never waits
//! for more background work than the bound written in `docs/design.md` ("The controller: threads
//! and background work"), however much background work is queued, and the queued work still runs
//! to the end. The same reads under the interchangeable model wait behind the whole job, which
//! shows the check can fail.

use kvssd_flash::{
    BlockAddress, ControllerModel, Flash, Lane, Profile, Purpose, SimTime, TimingProfile,
};

/// A flash of the `test_min` shape with PinK's timing under `model`, with one page programmed on
/// die 0 (block 0) for the reads.
fn flash(model: ControllerModel) -> (Flash, TimingProfile) {
    let profile = Profile::test_min();
    let timing = TimingProfile {
        controller: model,
        ..profile.timing.clone()
    };
    let mut flash = Flash::new(profile.geometry, Some(timing.clone())).expect("flash");
    let data = vec![1u8; profile.geometry.page_bytes as usize];
    let page = BlockAddress { die: 0, block: 0 }.page(0);
    flash
        .program(0, page, Purpose::UserData, &data, &[])
        .expect("program");
    (flash, timing)
}

/// Queues a background job issued at `at` that programs every page of blocks 1..=3 on die 0 and
/// erases block 1: about 24 programs and an erase, all on the die the reads go to.
fn queue_job(flash: &mut Flash, at: SimTime) -> Option<kvssd_flash::JobId> {
    let geometry = *flash.geometry();
    let data = vec![2u8; geometry.page_bytes as usize];
    flash.begin_background(at, Lane::Compaction);
    for block in 1..=3 {
        for page in 0..geometry.pages_per_block {
            let address = BlockAddress { die: 0, block }.page(page);
            flash
                .program(at, address, Purpose::Compaction, &data, &[])
                .expect("program");
        }
    }
    flash
        .erase(at, BlockAddress { die: 0, block: 1 }, Purpose::Gc)
        .expect("erase");
    flash.end_background()
}

/// The longest a read may take with background work on its die: its own time, one background
/// operation in flight on the die (a program or an erase), and the transfers of the operations
/// in flight on the other dies of its channel.
fn bound_ns(flash: &Flash, timing: &TimingProfile) -> u64 {
    let geometry = flash.geometry();
    let page = u64::from(geometry.page_bytes);
    timing.read_alone_ns(geometry.page_bytes)
        + timing
            .program_alone_ns(geometry.page_bytes)
            .max(timing.erase_ns)
        + u64::from(geometry.ways_per_channel - 1) * timing.transfer_ns(page)
}

/// Reads page 0 of die 0 every `step` from `start`, `count` times, advancing the command clock
/// as a device does; returns the longest latency.
fn worst_read(flash: &mut Flash, start: SimTime, step: u64, count: u64) -> u64 {
    let geometry = *flash.geometry();
    let mut data = vec![0u8; geometry.page_bytes as usize];
    let page = BlockAddress { die: 0, block: 0 }.page(0);
    let mut worst = 0;
    for index in 0..count {
        let at = start + index * step;
        flash.advance_clock(at);
        let read = flash
            .read(at, page, Purpose::UserData, &mut data, &mut [])
            .expect("read");
        worst = worst.max(read.done_at - at);
    }
    worst
}

#[test]
fn background_reads_wait_for_at_most_one_operation_per_die() {
    let (mut flash, timing) = flash(ControllerModel::Threads);
    let job = queue_job(&mut flash, 1_000).expect("the job asked for work");
    let bound = bound_ns(&flash, &timing);
    // A read every 3.7 ms (longer than the bound, so user reads never queue behind one another,
    // which the bound does not count) for 48 ms: they arrive all through the job, at every phase
    // of its programs and during its erase.
    let worst = worst_read(&mut flash, 1_000, 3_700_000, 13);
    assert!(
        worst <= bound,
        "a read waited {worst} ns behind background work, above the bound of {bound} ns"
    );
    // The job still ran, behind the reads.
    let done = flash
        .job_done_at(job, 1_000_000_000)
        .expect("the job finished");
    let work_alone = 24 * timing.program_alone_ns(flash.geometry().page_bytes) + timing.erase_ns;
    assert!(done >= 1_000 + work_alone, "done at {done}");
    assert_eq!(flash.counters().of(Purpose::Compaction).programs, 24);
}

#[test]
fn background_projection_is_when_the_job_ends_without_more_reads() {
    let (mut flash, timing) = flash(ControllerModel::Threads);
    // After the setup's own program on die 0 has completed.
    let start = 1_000_000;
    flash.advance_clock(start);
    let job = queue_job(&mut flash, start).expect("the job asked for work");
    let projected = flash.project_done(job);
    let alone = 24 * timing.program_alone_ns(flash.geometry().page_bytes) + timing.erase_ns;
    // One die does everything, one operation at a time: the projection is the work end to end.
    assert_eq!(projected, start + alone);
    // Nothing was issued on the real timeline by projecting.
    assert_eq!(flash.job_done_at(job, start), None);
}

#[test]
fn background_interchangeable_model_books_the_whole_job_at_once() {
    let (mut flash, timing) = flash(ControllerModel::Interchangeable);
    assert_eq!(queue_job(&mut flash, 1_000), None, "nothing is deferred");
    let bound = bound_ns(&flash, &timing);
    let worst = worst_read(&mut flash, 1_000, 200_000, 400);
    assert!(
        worst > 4 * bound,
        "reads wait behind the whole job here ({worst} ns against a bound of {bound} ns)"
    );
}

#[test]
fn background_jobs_queued_behind_the_first_of_their_lane_are_not_done() {
    let (mut flash, _) = flash(ControllerModel::Threads);
    let start = 1_000_000;
    flash.advance_clock(start);
    let geometry = *flash.geometry();
    let data = vec![3u8; geometry.page_bytes as usize];
    // Three jobs on one lane, each programming a block of die 0 (so each waits for the last).
    let jobs: Vec<kvssd_flash::JobId> = (1..=3)
        .map(|block| {
            flash.begin_background(start, Lane::Compaction);
            for page in 0..geometry.pages_per_block {
                let address = BlockAddress { die: 0, block }.page(page);
                flash
                    .program(start, address, Purpose::Compaction, &data, &[])
                    .expect("program");
            }
            flash.end_background().expect("the job asked for work")
        })
        .collect();
    // The lane's first job and the two behind it are all still queued.
    for &job in &jobs {
        assert_eq!(flash.job_done_at(job, start), None, "job {job:?}");
    }
    // Long after, every one has finished, in the order the lane ran them.
    flash.advance_clock(10_000_000_000);
    let done: Vec<SimTime> = jobs
        .iter()
        .map(|&job| flash.job_done_at(job, 10_000_000_000).expect("finished"))
        .collect();
    assert!(
        done[0] > start && done[0] < done[1] && done[1] < done[2],
        "{done:?}"
    );
}

//! The timing arithmetic of the busy-until model on the `pink` profile: each case computes the
//! expected completion time from the profile's parameters and compares it exactly.

use kvssd_flash::{BlockAddress, Flash, PageAddress, Profile, Purpose, TimingProfile};

struct Bench {
    flash: Flash,
    timing: TimingProfile,
    page: Vec<u8>,
    transfer_ns: u64,
}

/// A `pink` device (small capacity) with page 0 of block 0 programmed on every die, clock reset to a
/// quiet point far enough ahead that the programs do not interfere.
fn bench() -> (Bench, u64) {
    let profile = Profile::pink_with_blocks(4);
    let mut flash = Flash::new(profile.geometry, Some(profile.timing.clone())).expect("valid");
    let page = vec![0xA5u8; profile.geometry.page_bytes as usize];
    for die in 0..profile.geometry.dies() {
        flash
            .program(0, page_at(die, 0), Purpose::UserData, &page, &[])
            .expect("program");
    }
    let quiet = flash.quiescent_at();
    let transfer_ns = profile
        .timing
        .transfer_ns(u64::from(profile.geometry.page_bytes));
    (
        Bench {
            flash,
            timing: profile.timing,
            page,
            transfer_ns,
        },
        quiet,
    )
}

fn page_at(die: u32, page: u32) -> PageAddress {
    BlockAddress { die, block: 0 }.page(page)
}

impl Bench {
    fn read(&mut self, at: u64, die: u32) -> u64 {
        let mut data = self.page.clone();
        self.flash
            .read(at, page_at(die, 0), Purpose::UserData, &mut data, &mut [])
            .expect("read")
            .done_at
    }
}

#[test]
fn timing_one_read_alone_takes_tr_plus_transfer() {
    let (mut bench, t0) = bench();
    let done = bench.read(t0, 5);
    assert_eq!(done - t0, bench.timing.read_ns + bench.transfer_ns);
}

#[test]
fn timing_reads_on_all_64_dies_overlap() {
    let (mut bench, t0) = bench();
    let mut last = 0;
    for die in 0..64 {
        last = last.max(bench.read(t0, die));
    }
    // All 64 dies sense in parallel; each channel then moves its 8 pages one after another.
    let expected = t0 + bench.timing.read_ns + 8 * bench.transfer_ns;
    assert_eq!(last, expected);
    // Far less than 64 reads one after another.
    assert!(last - t0 < 64 * (bench.timing.read_ns + bench.transfer_ns) / 6);
}

#[test]
fn timing_two_reads_on_one_die_serialize() {
    let (mut bench, t0) = bench();
    let first = bench.read(t0, 9);
    let second = bench.read(t0, 9);
    assert_eq!(first - t0, bench.timing.read_ns + bench.transfer_ns);
    assert_eq!(second - first, bench.timing.read_ns + bench.transfer_ns);
}

#[test]
fn timing_a_program_delays_a_read_behind_it() {
    let (mut bench, t0) = bench();
    let page = bench.page.clone();
    let programmed = bench
        .flash
        .program(t0, page_at(3, 1), Purpose::UserData, &page, &[])
        .expect("program");
    assert_eq!(programmed - t0, bench.transfer_ns + bench.timing.program_ns);
    let read = bench.read(t0, 3);
    assert_eq!(read, programmed + bench.timing.read_ns + bench.transfer_ns);
    // A read on another channel is not delayed.
    let other = bench.read(t0, 4);
    assert_eq!(other - t0, bench.timing.read_ns + bench.transfer_ns);
}

#[test]
fn timing_transfers_on_one_channel_serialize() {
    let (mut bench, t0) = bench();
    // Dies 0, 8, 16, 24 share channel 0: they sense together, then transfer one by one.
    let done: Vec<u64> = [0, 8, 16, 24]
        .iter()
        .map(|&die| bench.read(t0, die))
        .collect();
    for (position, done) in done.iter().enumerate() {
        assert_eq!(
            *done,
            t0 + bench.timing.read_ns + (position as u64 + 1) * bench.transfer_ns
        );
    }
    // Two programs on different dies of one channel: the second transfer waits for the first.
    let page = bench.page.clone();
    let t1 = bench.flash.quiescent_at();
    let first = bench
        .flash
        .program(t1, page_at(1, 1), Purpose::UserData, &page, &[])
        .expect("program");
    let second = bench
        .flash
        .program(t1, page_at(9, 1), Purpose::UserData, &page, &[])
        .expect("program");
    assert_eq!(second - first, bench.transfer_ns);
}

#[test]
fn timing_erase_occupies_the_die() {
    let (mut bench, t0) = bench();
    let erased = bench
        .flash
        .erase(t0, BlockAddress { die: 2, block: 1 }, Purpose::Gc)
        .expect("erase");
    assert_eq!(erased - t0, bench.timing.erase_ns);
    let read = bench.read(t0, 2);
    assert_eq!(read, erased + bench.timing.read_ns + bench.transfer_ns);
}

#[test]
fn timing_controller_work_uses_the_cores() {
    let (mut bench, t0) = bench();
    let cores = u64::from(bench.timing.controller_cores);
    let done: Vec<u64> = (0..cores + 1)
        .map(|_| bench.flash.compute(t0, 1_000))
        .collect();
    assert!(done[..cores as usize].iter().all(|&at| at == t0 + 1_000));
    assert_eq!(
        done[cores as usize],
        t0 + 2_000,
        "the fifth job waits for a core"
    );
}

#[test]
fn timing_off_takes_no_time() {
    let profile = Profile::test_min();
    let mut flash = Flash::new(profile.geometry, None).expect("valid");
    let page = vec![1u8; profile.geometry.page_bytes as usize];
    let block = BlockAddress { die: 0, block: 0 };
    assert_eq!(
        flash
            .program(42, block.page(0), Purpose::UserData, &page, &[])
            .expect("program"),
        42
    );
    let mut back = page.clone();
    let read = flash
        .read(43, block.page(0), Purpose::UserData, &mut back, &mut [])
        .expect("read");
    assert_eq!(read.done_at, 43);
    assert_eq!(flash.erase(44, block, Purpose::Gc).expect("erase"), 44);
    assert_eq!(flash.compute(45, 1_000_000), 45);
    assert_eq!(flash.quiescent_at(), 0);
}

//! Fault injection: power cuts with in-flight programs that are lost, torn or completed; later
//! operations failing until power is restored; bad blocks; bit flips caught by the page checksum;
//! the read-retry policy.
//! Every case is deterministic from its seed.

use kvssd_flash::{
    BlockAddress, FaultConfig, Flash, FlashError, Profile, Purpose, READ_ATTEMPTS_MAX,
};

fn flash() -> Flash {
    let profile = Profile::test_min();
    Flash::new(profile.geometry, Some(profile.timing)).expect("valid")
}

fn page(flash: &Flash, byte: u8) -> Vec<u8> {
    vec![byte; flash.geometry().page_bytes as usize]
}

const BLOCK: BlockAddress = BlockAddress { die: 0, block: 1 };

/// Programs pages until the cut; returns the page the cut interrupted and what a read of it gives.
fn cut_during_program(
    seed: u64,
    torn_probability: f64,
) -> (u32, Result<Vec<u8>, FlashError>, Flash) {
    let mut flash = flash();
    flash.set_faults(FaultConfig {
        seed,
        power_cut_after_operations: Some(3),
        torn_program_probability: torn_probability,
        ..FaultConfig::default()
    });
    let mut interrupted = None;
    for index in 0..6u32 {
        let data = page(&flash, index as u8 + 1);
        match flash.program(0, BLOCK.page(index), Purpose::UserData, &data, &[]) {
            Ok(_) => assert!(index < 3, "operations after the cut must fail"),
            Err(FlashError::PowerCut) => {
                interrupted.get_or_insert(index);
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    let interrupted = interrupted.expect("power was cut");
    assert_eq!(interrupted, 3, "the cut comes after the third operation");
    assert!(flash.is_power_cut());
    let mut back = page(&flash, 0);
    assert!(matches!(
        flash.read(0, BLOCK.page(0), Purpose::Recovery, &mut back, &mut []),
        Err(FlashError::PowerCut)
    ));
    flash.restore_power();
    // Everything acknowledged before the cut is intact.
    for index in 0..3u32 {
        flash
            .read(0, BLOCK.page(index), Purpose::Recovery, &mut back, &mut [])
            .expect("acknowledged program survives");
        assert_eq!(back, page(&flash, index as u8 + 1));
    }
    let result = flash
        .read(0, BLOCK.page(3), Purpose::Recovery, &mut back, &mut [])
        .map(|_| back.clone());
    (interrupted, result, flash)
}

#[test]
fn faults_torn_program_reads_as_corrupt() {
    let (_, result, flash) = cut_during_program(7, 1.0);
    assert!(matches!(result, Err(FlashError::Corrupt { page }) if page == BLOCK.page(3)));
    // The torn page is consumed: the block goes on at the next page.
    assert_eq!(flash.programmed_pages(BLOCK).expect("in range"), 4);
}

#[test]
fn faults_torn_page_stays_corrupt_after_faults_are_cleared_until_erased() {
    let (_, _, mut flash) = cut_during_program(7, 1.0);
    flash.set_faults(FaultConfig::default());
    assert!(
        !flash.verifies_every_read(),
        "ram media trusts untouched pages"
    );
    let mut back = page(&flash, 0);
    assert!(matches!(
        flash.read(0, BLOCK.page(3), Purpose::Recovery, &mut back, &mut []),
        Err(FlashError::Corrupt { .. })
    ));
    flash.erase(0, BLOCK, Purpose::Gc).expect("erase");
    for index in 0..4u32 {
        let data = page(&flash, 40 + index as u8);
        flash
            .program(0, BLOCK.page(index), Purpose::UserData, &data, &[])
            .expect("program");
        flash
            .read(0, BLOCK.page(index), Purpose::UserData, &mut back, &mut [])
            .expect("read");
        assert_eq!(back, data);
    }
}

#[test]
fn faults_untorn_in_flight_program_is_lost_or_complete() {
    let mut seen_lost = false;
    let mut seen_complete = false;
    for seed in 0..32 {
        let (_, result, flash) = cut_during_program(seed, 0.0);
        match result {
            Err(FlashError::ReadErased { .. }) => {
                seen_lost = true;
                assert_eq!(flash.programmed_pages(BLOCK).expect("in range"), 3);
            }
            Ok(data) => {
                seen_complete = true;
                assert_eq!(data, page(&flash, 4));
            }
            Err(other) => panic!("seed {seed}: unexpected {other}"),
        }
    }
    assert!(
        seen_lost && seen_complete,
        "both outcomes occur across seeds"
    );
}

#[test]
fn faults_power_cut_is_deterministic_from_the_seed() {
    let outcome = |seed| {
        let (_, result, _) = cut_during_program(seed, 1.0 / 3.0);
        format!("{result:?}")
    };
    for seed in 0..8 {
        assert_eq!(outcome(seed), outcome(seed), "seed {seed}");
    }
}

#[test]
fn faults_bad_block_fails_programs_and_erases() {
    let mut flash = flash();
    let bad = BlockAddress { die: 1, block: 1 };
    let data = page(&flash, 1);
    flash.set_faults(FaultConfig {
        bad_blocks: vec![bad],
        ..FaultConfig::default()
    });
    assert!(flash.is_bad(bad));
    assert!(matches!(
        flash.program(0, bad.page(0), Purpose::UserData, &data, &[]),
        Err(FlashError::ProgramFailed { page }) if page == bad.page(0)
    ));
    assert_eq!(flash.programmed_pages(bad).expect("in range"), 0);
    assert!(matches!(
        flash.erase(0, bad, Purpose::Gc),
        Err(FlashError::EraseFailed { .. })
    ));
    // Other blocks work.
    flash
        .program(0, BLOCK.page(0), Purpose::UserData, &data, &[])
        .expect("good block");
}

#[test]
fn faults_bit_flips_are_detected_never_returned() {
    let mut flash = flash();
    let data: Vec<u8> = (0..flash.geometry().page_bytes).map(|i| i as u8).collect();
    flash
        .program(0, BLOCK.page(0), Purpose::UserData, &data, b"meta")
        .expect("program");
    flash.set_faults(FaultConfig {
        seed: 11,
        bit_flip_probability: 0.5,
        ..FaultConfig::default()
    });
    let mut corrupt = 0;
    let mut clean = 0;
    for _ in 0..400 {
        let mut back = vec![0u8; data.len()];
        let mut oob = [0u8; 4];
        match flash.read(0, BLOCK.page(0), Purpose::UserData, &mut back, &mut oob) {
            Ok(_) => {
                assert_eq!(back, data, "a read that succeeds returns the true data");
                assert_eq!(&oob, b"meta");
                clean += 1;
            }
            Err(FlashError::Corrupt { page }) => {
                assert_eq!(page, BLOCK.page(0));
                corrupt += 1;
            }
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert!(
        (150..=250).contains(&corrupt),
        "about half the reads flip a bit: {corrupt}"
    );
    assert_eq!(corrupt + clean, 400);
}

/// The read-retry policy: a torn page fails every read and is read exactly `READ_ATTEMPTS_MAX`
/// times before `Corrupt` is returned; a transient flip is retried away.
#[test]
fn faults_read_retrying_reads_a_torn_page_read_attempts_max_times() {
    let (_, _, mut flash) = cut_during_program(7, 1.0);
    let mut back = page(&flash, 0);
    let before = flash.counters().of(Purpose::Recovery).reads;
    let result = flash.read_retrying(0, BLOCK.page(3), Purpose::Recovery, &mut back, &mut []);
    assert!(matches!(result, Err(FlashError::Corrupt { .. })));
    let reads = flash.counters().of(Purpose::Recovery).reads - before;
    assert_eq!(reads, u64::from(READ_ATTEMPTS_MAX));

    flash.set_faults(FaultConfig {
        seed: 3,
        bit_flip_probability: 0.2,
        ..FaultConfig::default()
    });
    for _ in 0..50 {
        flash
            .read_retrying(0, BLOCK.page(0), Purpose::Recovery, &mut back, &mut [])
            .expect("a flip on the way out is retried away");
        assert_eq!(back, page(&flash, 1));
    }
}

#[test]
fn faults_cut_during_erase_leaves_block_whole_or_erased() {
    for seed in 0..16 {
        let mut flash = flash();
        let data = page(&flash, 5);
        flash
            .program(0, BLOCK.page(0), Purpose::UserData, &data, &[])
            .expect("program");
        flash.set_faults(FaultConfig {
            seed,
            power_cut_after_operations: Some(0),
            ..FaultConfig::default()
        });
        assert!(matches!(
            flash.erase(0, BLOCK, Purpose::Gc),
            Err(FlashError::PowerCut)
        ));
        flash.restore_power();
        let mut back = page(&flash, 0);
        match flash.read(0, BLOCK.page(0), Purpose::Recovery, &mut back, &mut []) {
            Ok(_) => {
                assert_eq!(back, data);
                assert_eq!(flash.erase_count(BLOCK).expect("in range"), 0);
            }
            Err(FlashError::ReadErased { .. }) => {
                assert_eq!(flash.erase_count(BLOCK).expect("in range"), 1);
            }
            Err(other) => panic!("seed {seed}: unexpected {other}"),
        }
    }
}

#[test]
fn faults_cut_power_now_and_restore() {
    let mut flash = flash();
    let data = page(&flash, 1);
    flash.cut_power();
    assert!(matches!(
        flash.program(0, BLOCK.page(0), Purpose::UserData, &data, &[]),
        Err(FlashError::PowerCut)
    ));
    assert!(matches!(flash.sync(), Err(FlashError::PowerCut)));
    flash.restore_power();
    flash
        .program(0, BLOCK.page(0), Purpose::UserData, &data, &[])
        .expect("after restore");
}

//! The NAND rules: every violation is a typed error naming the address, checked before anything
//! happens, on both media.

use kvssd_flash::{BlockAddress, Flash, FlashError, Profile, Purpose};

fn flash() -> Flash {
    let profile = Profile::test_min();
    Flash::new(profile.geometry, Some(profile.timing)).expect("valid profile")
}

fn page_of(flash: &Flash, byte: u8) -> Vec<u8> {
    vec![byte; flash.geometry().page_bytes as usize]
}

const BLOCK: BlockAddress = BlockAddress { die: 1, block: 3 };

#[test]
fn rules_program_twice_is_refused() {
    let mut flash = flash();
    let data = page_of(&flash, 1);
    flash
        .program(0, BLOCK.page(0), Purpose::UserData, &data, &[])
        .expect("first program");
    let error = flash
        .program(0, BLOCK.page(0), Purpose::UserData, &data, &[])
        .expect_err("second program of the same page");
    assert!(matches!(error, FlashError::ProgramTwice { page } if page == BLOCK.page(0)));
    assert!(
        error.to_string().contains("die 1 block 3 page 0"),
        "{error}"
    );
}

#[test]
fn rules_pages_are_programmed_in_order() {
    let mut flash = flash();
    let data = page_of(&flash, 1);
    let error = flash
        .program(0, BLOCK.page(2), Purpose::UserData, &data, &[])
        .expect_err("skipping pages 0 and 1");
    assert!(matches!(
        error,
        FlashError::ProgramOutOfOrder { next: 0, .. }
    ));
    // Nothing was consumed by the refused program.
    assert_eq!(flash.programmed_pages(BLOCK).expect("in range"), 0);
    assert_eq!(flash.operations(), 0);
}

#[test]
fn rules_reading_an_erased_page_is_an_error() {
    let mut flash = flash();
    let mut data = page_of(&flash, 0);
    let error = flash
        .read(0, BLOCK.page(0), Purpose::UserData, &mut data, &mut [])
        .expect_err("never programmed");
    assert!(matches!(error, FlashError::ReadErased { .. }));
}

#[test]
fn rules_erase_resets_the_whole_block_and_counts() {
    let mut flash = flash();
    let pages = flash.geometry().pages_per_block;
    let data = page_of(&flash, 9);
    for page in 0..pages {
        flash
            .program(0, BLOCK.page(page), Purpose::UserData, &data, &[])
            .expect("in order");
    }
    let error = flash
        .program(0, BLOCK.page(pages), Purpose::UserData, &data, &[])
        .expect_err("past the end of the block");
    assert!(matches!(error, FlashError::PageOutOfRange { .. }));
    assert_eq!(flash.erase_count(BLOCK).expect("in range"), 0);
    assert_eq!(flash.erase_count_range(), (0, 0));
    flash.erase(0, BLOCK, Purpose::Gc).expect("erase");
    assert_eq!(flash.erase_count(BLOCK).expect("in range"), 1);
    assert_eq!(
        flash.erase_count_range(),
        (0, 1),
        "the other blocks were never erased"
    );
    assert_eq!(flash.programmed_pages(BLOCK).expect("in range"), 0);
    let mut back = page_of(&flash, 0);
    for page in 0..pages {
        assert!(matches!(
            flash.read(0, BLOCK.page(page), Purpose::Gc, &mut back, &mut []),
            Err(FlashError::ReadErased { .. })
        ));
    }
    // After the erase the block is programmed from page 0 again.
    flash
        .program(
            0,
            BLOCK.page(0),
            Purpose::UserData,
            &page_of(&flash, 3),
            &[],
        )
        .expect("program after erase");
    flash
        .read(0, BLOCK.page(0), Purpose::UserData, &mut back, &mut [])
        .expect("read after erase");
    assert_eq!(back, page_of(&flash, 3));
    // Other blocks were not touched.
    assert_eq!(
        flash
            .erase_count(BlockAddress { die: 0, block: 0 })
            .expect("in range"),
        0
    );
}

#[test]
fn rules_addresses_outside_the_device_are_refused() {
    let mut flash = flash();
    let geometry = *flash.geometry();
    let data = page_of(&flash, 0);
    let mut back = page_of(&flash, 0);
    let outside = [
        BlockAddress {
            die: geometry.dies(),
            block: 0,
        }
        .page(0),
        BlockAddress {
            die: 0,
            block: geometry.blocks_per_die,
        }
        .page(0),
        BlockAddress { die: 0, block: 0 }.page(geometry.pages_per_block),
    ];
    for page in outside {
        assert!(matches!(
            flash.program(0, page, Purpose::UserData, &data, &[]),
            Err(FlashError::PageOutOfRange { .. })
        ));
        assert!(matches!(
            flash.read(0, page, Purpose::UserData, &mut back, &mut []),
            Err(FlashError::PageOutOfRange { .. })
        ));
    }
    assert!(matches!(
        flash.erase(
            0,
            BlockAddress {
                die: 0,
                block: geometry.blocks_per_die
            },
            Purpose::Gc
        ),
        Err(FlashError::BlockOutOfRange { .. })
    ));
    assert!(flash
        .erase_count(BlockAddress { die: 99, block: 0 })
        .is_err());
}

#[test]
fn rules_buffers_must_fit_the_geometry() {
    let mut flash = flash();
    let geometry = *flash.geometry();
    let short = vec![0u8; geometry.page_bytes as usize - 1];
    assert!(matches!(
        flash.program(0, BLOCK.page(0), Purpose::UserData, &short, &[]),
        Err(FlashError::BufferSize {
            what: "page data",
            ..
        })
    ));
    let data = page_of(&flash, 0);
    let oob = vec![0u8; geometry.oob_user_bytes() as usize + 1];
    assert!(matches!(
        flash.program(0, BLOCK.page(0), Purpose::UserData, &data, &oob),
        Err(FlashError::BufferSize { what: "OOB", .. })
    ));
}

#[test]
fn rules_oob_round_trips_with_the_payload() {
    let mut flash = flash();
    let user_oob_bytes = flash.geometry().oob_user_bytes() as usize;
    let oob: Vec<u8> = (0..user_oob_bytes as u8).collect();
    let data: Vec<u8> = (0..flash.geometry().page_bytes)
        .map(|i| (i * 7) as u8)
        .collect();
    flash
        .program(0, BLOCK.page(0), Purpose::Index, &data, &oob)
        .expect("program");
    let mut back = page_of(&flash, 0);
    let mut back_oob = vec![0u8; user_oob_bytes];
    let read = flash
        .read(0, BLOCK.page(0), Purpose::Index, &mut back, &mut back_oob)
        .expect("read");
    assert_eq!(back, data);
    assert_eq!(back_oob, oob);
    assert_eq!(read.sequence, 0);
    // A short OOB write is zero-padded.
    flash
        .program(0, BLOCK.page(1), Purpose::Index, &data, &[5, 6])
        .expect("program");
    let read = flash
        .read(0, BLOCK.page(1), Purpose::Index, &mut back, &mut back_oob)
        .expect("read");
    assert_eq!(&back_oob[..3], &[5, 6, 0]);
    assert_eq!(read.sequence, 1, "program sequence numbers increase");
}

#[test]
fn rules_counters_follow_purposes() {
    let mut flash = flash();
    let data = page_of(&flash, 0);
    let mut back = page_of(&flash, 0);
    let before = flash.counters();
    flash
        .program(0, BLOCK.page(0), Purpose::Log, &data, &[])
        .expect("program");
    flash
        .read(0, BLOCK.page(0), Purpose::Recovery, &mut back, &mut [])
        .expect("read");
    flash.erase(0, BLOCK, Purpose::Gc).expect("erase");
    let phase = flash.counters() - before;
    let page_bytes = u64::from(flash.geometry().page_bytes);
    assert_eq!(phase.of(Purpose::Log).programs, 1);
    assert_eq!(phase.of(Purpose::Log).program_bytes, page_bytes);
    assert_eq!(phase.of(Purpose::Recovery).reads, 1);
    assert_eq!(phase.of(Purpose::Gc).erases, 1);
    assert_eq!(
        phase.of(Purpose::Gc).erase_bytes,
        flash.geometry().block_bytes()
    );
    assert_eq!(phase.of(Purpose::UserData), Default::default());
    assert_eq!(phase.total().programs, 1);
}

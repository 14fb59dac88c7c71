//! File media I/O made without the flash's lock: programs queued by write-behind and written by a
//! drain, and reads issued under the lock and performed after it.

use kvssd_flash::{BlockAddress, Flash, Geometry, Profile, Purpose};

fn geometry() -> Geometry {
    Profile::test_min().geometry
}

fn page(byte: u8) -> Vec<u8> {
    vec![byte; geometry().page_bytes as usize]
}

fn read(flash: &mut Flash, block: BlockAddress, number: u32) -> Vec<u8> {
    let mut back = page(0);
    let mut oob = [0u8; 4];
    flash
        .read(
            0,
            block.page(number),
            Purpose::UserData,
            &mut back,
            &mut oob,
        )
        .expect("read");
    back
}

#[test]
fn write_behind_queues_programs_until_drained_and_reads_see_them_meanwhile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 1, block: 2 };
    let mut flash = Flash::create(&path, geometry(), None).expect("create");
    flash.set_write_behind(true).expect("write-behind on");
    let queue = flash.write_behind().expect("file media have a queue");
    let writes = flash.file_io().expect("file media").writes;
    for number in 0..3u8 {
        flash
            .program(
                0,
                block.page(u32::from(number)),
                Purpose::UserData,
                &page(number + 1),
                &[number; 4],
            )
            .expect("program");
    }
    assert_eq!(queue.pending(), 3, "programs wait in the queue");
    assert_eq!(flash.file_io().expect("file media").writes, writes);
    assert_eq!(
        read(&mut flash, block, 1),
        page(2),
        "a read takes a queued page"
    );

    let before_drain = Flash::open(&path, None, None).expect("open the image beside it");
    assert_eq!(
        before_drain.programmed_pages(block).expect("block"),
        0,
        "nothing reached the file yet"
    );
    drop(before_drain);

    queue.drain().expect("drain");
    assert_eq!(queue.pending(), 0);
    assert_eq!(
        flash.file_io().expect("file media").writes - writes,
        1,
        "three consecutive pages go out in one write"
    );
    let mut reopened = Flash::open(&path, None, None).expect("reopen");
    assert_eq!(reopened.programmed_pages(block).expect("block"), 3);
    for number in 0..3u8 {
        assert_eq!(
            read(&mut reopened, block, u32::from(number)),
            page(number + 1)
        );
    }
}

#[test]
fn dropping_the_flash_writes_what_is_queued() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 0, block: 1 };
    {
        let mut flash = Flash::create(&path, geometry(), None).expect("create");
        flash.set_write_behind(true).expect("write-behind on");
        flash
            .program(0, block.page(0), Purpose::UserData, &page(9), &[1; 4])
            .expect("program");
    }
    let mut reopened = Flash::open(&path, None, None).expect("reopen");
    assert_eq!(read(&mut reopened, block, 0), page(9));
}

#[test]
fn a_detached_read_of_the_whole_payload_returns_it_and_refuses_a_page_erased_since() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 2, block: 4 };
    let mut flash = Flash::create(&path, geometry(), None).expect("create");
    flash
        .program(0, block.page(0), Purpose::UserData, &page(5), &[0; 4])
        .expect("program");
    let reads = flash.counters().of(Purpose::UserData).reads;
    let read = issue(&mut flash, block);
    assert_eq!(
        flash.counters().of(Purpose::UserData).reads,
        reads + 1,
        "the read is counted when issued"
    );
    assert_eq!(read.run().expect("read"), Some(page(5)));

    // Erased and programmed again after the read was issued: the read reports nothing, whether
    // the new bytes are still queued or already in the file.
    for behind in [false, true] {
        flash.set_write_behind(behind).expect("write-behind");
        let read = issue(&mut flash, block);
        erase_and_program(&mut flash, block, 6);
        assert_eq!(read.run().expect("read"), None, "write-behind {behind}");
        assert_eq!(issue(&mut flash, block).run().expect("read"), Some(page(6)));
        flash.set_write_behind(false).expect("drain");
        let read = issue(&mut flash, block);
        erase_and_program(&mut flash, block, 5);
        assert_eq!(read.run().expect("read"), None);
    }
}

#[test]
fn a_detached_range_read_returns_those_bytes_alone_and_refuses_an_erased_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 1, block: 3 };
    let mut flash = Flash::create(&path, geometry(), None).expect("create");
    let mut bytes = page(0);
    for (at, byte) in bytes.iter_mut().enumerate() {
        *byte = at as u8;
    }
    flash
        .program(0, block.page(0), Purpose::UserData, &bytes, &[0; 4])
        .expect("program");
    for behind in [false, true] {
        flash.set_write_behind(behind).expect("write-behind");
        let (read, _) = flash
            .read_detached_range(0, block.page(0), Purpose::UserData, 100..160)
            .expect("issue")
            .expect("file media detach reads");
        assert_eq!(read.run().expect("read"), Some(bytes[100..160].to_vec()));
        let (read, _) = flash
            .read_detached_range(0, block.page(0), Purpose::UserData, 0..8)
            .expect("issue")
            .expect("file media detach reads");
        flash.erase(0, block, Purpose::Gc).expect("erase");
        flash
            .program(0, block.page(0), Purpose::UserData, &bytes, &[0; 4])
            .expect("program");
        assert_eq!(read.run().expect("read"), None, "write-behind {behind}");
    }
    let past_the_page = geometry().page_bytes as usize + 1;
    assert!(flash
        .read_detached_range(0, block.page(0), Purpose::UserData, 0..past_the_page)
        .is_err());
}

#[test]
fn reads_run_together_answer_as_each_read_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let mut flash = Flash::create(&path, geometry(), None).expect("create");
    let near = BlockAddress { die: 1, block: 3 };
    let far = BlockAddress { die: 3, block: 14 };
    let payload = |seed: u8| -> Vec<u8> {
        (0..page(0).len())
            .map(|at| (at as u8).wrapping_mul(7) ^ seed)
            .collect()
    };
    for number in 0..3u8 {
        flash
            .program(
                0,
                near.page(u32::from(number)),
                Purpose::UserData,
                &payload(number),
                &[0; 4],
            )
            .expect("program");
    }
    flash
        .program(0, far.page(0), Purpose::UserData, &payload(9), &[0; 4])
        .expect("program");
    let erased = BlockAddress { die: 0, block: 5 };
    flash
        .program(0, erased.page(0), Purpose::UserData, &payload(4), &[0; 4])
        .expect("program");
    // A page still in the write-behind queue.
    flash.set_write_behind(true).expect("write-behind on");
    flash
        .program(0, near.page(3), Purpose::UserData, &payload(3), &[0; 4])
        .expect("program");
    let page_bytes = page(0).len();
    // Neighbours within a page and across pages of one block, a range read twice, ranges that
    // overlap, a page far away, the queued page, and a page erased after its read was issued.
    let wanted: Vec<(BlockAddress, u32, std::ops::Range<usize>)> = vec![
        (near, 1, 300..400),
        (near, 0, 10..60),
        (near, 0, 60..100),
        (far, 0, 0..page_bytes),
        (near, 2, 0..32),
        (near, 0, 10..60),
        (near, 0, 40..120),
        (near, 3, 5..25),
        (erased, 0, 0..16),
        (near, 1, page_bytes - 12..page_bytes),
    ];
    let reads: Vec<kvssd_flash::DetachedRead> = wanted
        .iter()
        .map(|(block, number, range)| {
            flash
                .read_detached_range(0, block.page(*number), Purpose::UserData, range.clone())
                .expect("issue")
                .expect("file media detach reads")
                .0
        })
        .collect();
    flash.erase(0, erased, Purpose::Gc).expect("erase");
    let alone: Vec<Option<Vec<u8>>> = reads.iter().map(|read| read.run().expect("read")).collect();
    let together =
        kvssd_flash::DetachedRead::run_all(&reads.iter().collect::<Vec<_>>()).expect("read");
    assert_eq!(together, alone);
    for ((block, number, range), answer) in wanted.iter().zip(&together) {
        let expected = match (block.die, number) {
            (0, _) => None,
            (3, _) => Some(payload(9)[range.clone()].to_vec()),
            (_, number) => Some(payload(*number as u8)[range.clone()].to_vec()),
        };
        assert_eq!(answer, &expected, "page {number} of {block:?}, {range:?}");
    }
}

#[test]
fn a_queue_grown_past_its_bound_is_written_without_waiting_for_a_drain() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let geometry = Geometry {
        channels: 1,
        ways_per_channel: 1,
        blocks_per_die: 8,
        pages_per_block: 256,
        page_bytes: 512,
        oob_bytes: 64,
    };
    let mut flash = Flash::create(&path, geometry, None).expect("create");
    flash.set_write_behind(true).expect("write-behind on");
    let queue = flash.write_behind().expect("file media have a queue");
    let pages = 1_100u32;
    for number in 0..pages {
        let block = BlockAddress {
            die: 0,
            block: number / geometry.pages_per_block,
        };
        flash
            .program(
                0,
                block.page(number % geometry.pages_per_block),
                Purpose::UserData,
                &vec![number as u8; 512],
                &[1; 4],
            )
            .expect("program");
    }
    // Nobody drains: the queue's own thread writes it once it holds more than 1,024 slots
    // (all of them, or those queued by the time it looked).
    let waited = std::time::Instant::now();
    while queue.pending() > 1_024 && waited.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(queue.pending() <= 1_024, "the queue was not written");
    let mut beside = Flash::open(&path, None, None).expect("open the image beside it");
    let first = BlockAddress { die: 0, block: 0 };
    assert_eq!(
        beside.programmed_pages(first).expect("block"),
        geometry.pages_per_block
    );
    let mut back = vec![0u8; 512];
    let mut oob = [0u8; 4];
    beside
        .read(0, first.page(7), Purpose::UserData, &mut back, &mut oob)
        .expect("read");
    assert_eq!(back, vec![7u8; 512]);
}

/// A detached read of page 0's whole payload.
fn issue(flash: &mut Flash, block: BlockAddress) -> kvssd_flash::DetachedRead {
    flash
        .read_detached_range(0, block.page(0), Purpose::UserData, 0..page(0).len())
        .expect("issue")
        .expect("file media detach reads")
        .0
}

fn erase_and_program(flash: &mut Flash, block: BlockAddress, byte: u8) {
    flash.erase(0, block, Purpose::Gc).expect("erase");
    flash
        .program(0, block.page(0), Purpose::UserData, &page(byte), &[0; 4])
        .expect("program");
}

#[test]
fn memory_media_detach_no_read() {
    let profile = Profile::test_min();
    let mut flash = Flash::new(profile.geometry, None).expect("flash");
    let block = BlockAddress { die: 0, block: 0 };
    flash
        .program(0, block.page(0), Purpose::UserData, &page(1), &[0; 4])
        .expect("program");
    assert!(flash
        .read_detached_range(0, block.page(0), Purpose::UserData, 0..8)
        .expect("issue")
        .is_none());
}

/// Writers that program under a shared lock and then drain without waiting for a drain already
/// running (as the device's commands do): once every writer has returned, nothing is left in
/// the queue, and the file holds every page, although most writers never wrote their own.
#[test]
fn writers_that_leave_their_pages_to_a_running_drain_leave_none_behind() {
    const WRITERS: u32 = 4;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let geometry = geometry();
    let mut flash = Flash::create(&path, geometry, None).expect("create");
    flash.set_write_behind(true).expect("write-behind on");
    let queue = flash.write_behind().expect("file media have a queue");
    let flash = std::sync::Mutex::new(flash);
    let blocks_per_writer = geometry.blocks_per_die / WRITERS;
    for round in 0..20u8 {
        std::thread::scope(|scope| {
            for writer in 0..WRITERS {
                let (flash, queue) = (&flash, &queue);
                scope.spawn(move || {
                    for die in 0..geometry.dies() {
                        for block in 0..blocks_per_writer {
                            let block = BlockAddress {
                                die,
                                block: writer * blocks_per_writer + block,
                            };
                            for number in 0..geometry.pages_per_block {
                                let mut flash = flash.lock().expect("flash");
                                if number == 0 && round > 0 {
                                    flash.erase(0, block, Purpose::Gc).expect("erase");
                                }
                                flash
                                    .program(
                                        0,
                                        block.page(number),
                                        Purpose::UserData,
                                        &page(round.wrapping_add(number as u8)),
                                        &[round; 4],
                                    )
                                    .expect("program");
                                drop(flash);
                                queue.drain_unless_draining().expect("drain");
                            }
                        }
                    }
                });
            }
        });
        assert_eq!(queue.pending(), 0, "round {round}: slots left in the queue");
    }
    drop(flash);
    let mut reopened = Flash::open(&path, None, None).expect("reopen");
    for die in 0..geometry.dies() {
        for block in 0..WRITERS * blocks_per_writer {
            let block = BlockAddress { die, block };
            for number in 0..geometry.pages_per_block {
                assert_eq!(
                    read(&mut reopened, block, number),
                    page(19u8.wrapping_add(number as u8))
                );
            }
        }
    }
}

#[test]
fn a_page_handed_over_is_written_as_a_borrowed_page_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let block = BlockAddress { die: 0, block: 1 };
    let image = |name: &str, owned: bool| {
        let path = dir.path().join(name);
        let mut flash = Flash::create(&path, geometry(), None).expect("create");
        flash.set_write_behind(true).expect("write-behind on");
        for number in 0..4u8 {
            let oob = [number, 7, number];
            let at = block.page(u32::from(number));
            if owned {
                // From the flash's own buffer, with room for the OOB area, and from a plain
                // vector without it.
                let mut data = if number % 2 == 0 {
                    flash.page_buffer()
                } else {
                    page(0)
                };
                data.fill(number + 1);
                data[0] = 0xA5;
                flash
                    .program_owned(0, at, Purpose::UserData, data, &oob)
                    .expect("program an owned page");
            } else {
                let mut data = page(number + 1);
                data[0] = 0xA5;
                flash
                    .program(0, at, Purpose::UserData, &data, &oob)
                    .expect("program a borrowed page");
            }
        }
        let mut expected = page(2);
        expected[0] = 0xA5;
        assert_eq!(read(&mut flash, block, 1), expected, "read from the queue");
        flash.sync().expect("sync");
        drop(flash);
        std::fs::read(&path).expect("the image's bytes")
    };
    let borrowed = image("borrowed.kvssd", false);
    let owned = image("owned.kvssd", true);
    assert_eq!(borrowed.len(), owned.len());
    assert!(borrowed == owned, "the two images differ");
}

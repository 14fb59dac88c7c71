//! File media: what was programmed survives close and reopen (payload, OOB, erase counts, write
//! pointers), and images that are foreign, damaged, of another version or another geometry are
//! refused with a clear error.

use std::fs;
use std::os::unix::fs::FileExt;

use kvssd_flash::{
    BlockAddress, Flash, FlashError, Geometry, MediaKind, Profile, Purpose, IMAGE_FORMAT_VERSION,
};

fn geometry() -> Geometry {
    Profile::test_min().geometry
}

fn page(byte: u8) -> Vec<u8> {
    vec![byte; geometry().page_bytes as usize]
}

#[test]
fn file_media_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 2, block: 5 };
    {
        let mut flash = Flash::create(&path, geometry(), None).expect("create");
        assert_eq!(flash.media_kind(), MediaKind::File(path.clone()));
        flash
            .program(0, block.page(0), Purpose::UserData, &page(1), b"first")
            .expect("program");
        flash.erase(0, block, Purpose::Gc).expect("erase");
        flash
            .program(0, block.page(0), Purpose::UserData, &page(2), b"second")
            .expect("program");
        flash
            .program(0, block.page(1), Purpose::UserData, &page(3), b"third")
            .expect("program");
        flash.sync().expect("sync");
    }
    let mut flash = Flash::open(&path, Some(&geometry()), None).expect("reopen");
    assert_eq!(flash.erase_count(block).expect("in range"), 1);
    assert_eq!(flash.programmed_pages(block).expect("in range"), 2);
    let mut back = page(0);
    let mut oob = [0u8; 6];
    let read = flash
        .read(0, block.page(0), Purpose::Recovery, &mut back, &mut oob)
        .expect("read");
    assert_eq!((back.clone(), &oob), (page(2), b"second"));
    let read_later = flash
        .read(
            0,
            block.page(1),
            Purpose::Recovery,
            &mut back,
            &mut oob[..5],
        )
        .expect("read");
    assert_eq!((back.clone(), &oob[..5]), (page(3), &b"third"[..]));
    assert!(read_later.sequence > read.sequence);
    // The rules still hold after reopening, and new programs continue the sequence.
    assert!(matches!(
        flash.program(0, block.page(1), Purpose::UserData, &page(4), &[]),
        Err(FlashError::ProgramTwice { .. })
    ));
    assert!(matches!(
        flash.read(0, block.page(2), Purpose::UserData, &mut back, &mut []),
        Err(FlashError::ReadErased { .. })
    ));
    flash
        .program(0, block.page(2), Purpose::UserData, &page(4), &[])
        .expect("program");
    let newest = flash
        .read(0, block.page(2), Purpose::UserData, &mut back, &mut [])
        .expect("read");
    assert!(newest.sequence > read_later.sequence);
    assert_eq!(Flash::probe(&path).expect("probe"), geometry());
}

#[test]
fn file_media_refuses_another_geometry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    Flash::create(&path, geometry(), None).expect("create");
    let mut other = geometry();
    other.blocks_per_die += 1;
    let error = Flash::open(&path, Some(&other), None)
        .err()
        .expect("mismatch");
    assert!(matches!(error, FlashError::GeometryMismatch { .. }));
    let message = error.to_string();
    assert!(
        message.contains("16 blocks") && message.contains("17 blocks"),
        "{message}"
    );
    assert!(!message.contains('\n'));
}

#[test]
fn file_media_refuses_foreign_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("notes.txt");
    fs::write(&text, "just some text, not a flash image\n".repeat(200)).expect("write");
    let error = Flash::open(&text, None, None).err().expect("foreign");
    assert!(matches!(error, FlashError::NotAnImage { .. }), "{error}");
    assert!(error.to_string().contains("not a kvssd flash image"));

    let empty = dir.path().join("empty");
    fs::write(&empty, b"").expect("write");
    assert!(matches!(
        Flash::open(&empty, None, None),
        Err(FlashError::NotAnImage { .. })
    ));

    let missing = dir.path().join("missing");
    assert!(matches!(
        Flash::open(&missing, None, None),
        Err(FlashError::Io { .. })
    ));
}

#[test]
fn file_media_detects_damaged_headers_versions_and_truncation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    Flash::create(&path, geometry(), None).expect("create");
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");

    // A damaged geometry field fails the header checksum.
    file.write_all_at(&[99], 12).expect("damage");
    assert!(matches!(
        Flash::open(&path, None, None),
        Err(FlashError::HeaderCorrupt { .. })
    ));

    // Another format version, with a correct checksum, is refused by version: a future one, and
    // version 1, whose payload and OOB regions were apart.
    for (version, name) in [(3u32, "future"), (1, "version 1")] {
        Flash::create(&path, geometry(), None).expect("create");
        let mut header = [0u8; 72];
        fs::File::open(&path)
            .expect("open")
            .read_exact_at(&mut header, 0)
            .expect("read");
        header[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = crc32c::crc32c(&header[..68]);
        header[68..72].copy_from_slice(&crc.to_le_bytes());
        file.write_all_at(&header, 0).expect("write");
        let error = Flash::open(&path, None, None).err().expect(name);
        assert!(
            matches!(
                error,
                FlashError::UnsupportedVersion {
                    found,
                    supported: IMAGE_FORMAT_VERSION,
                    ..
                } if found == version
            ),
            "{name}: {error}"
        );
        let message = error.to_string();
        assert!(
            message.contains(&format!("version {version}")) && !message.contains('\n'),
            "{message}"
        );
    }

    // A truncated image is refused.
    Flash::create(&path, geometry(), None).expect("create");
    file.set_len(8192).expect("truncate");
    assert!(matches!(
        Flash::open(&path, None, None),
        Err(FlashError::ImageTooSmall { .. })
    ));
}

#[test]
fn file_media_detects_corrupt_pages_with_their_address() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 1, block: 2 };
    {
        let mut flash = Flash::create(&path, geometry(), None).expect("create");
        flash
            .program(0, block.page(0), Purpose::UserData, &page(7), &[])
            .expect("program");
    }
    // Flip one payload byte of that page directly in the file.
    let bytes = fs::read(&path).expect("read");
    let needle = page(7);
    let offset = bytes
        .windows(needle.len())
        .position(|window| window == needle.as_slice())
        .expect("the page is in the file");
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    file.write_all_at(&[0x77], (offset + 100) as u64)
        .expect("damage");
    let mut flash = Flash::open(&path, None, None).expect("reopen");
    let mut back = page(0);
    let error = flash
        .read(0, block.page(0), Purpose::UserData, &mut back, &mut [])
        .expect_err("corrupt");
    assert!(matches!(error, FlashError::Corrupt { page } if page == block.page(0)));
    assert!(error.to_string().contains("die 1 block 2 page 0"));
}

#[test]
fn file_media_move_a_page_in_one_system_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 0, block: 3 };
    let mut flash = Flash::create(&path, geometry(), None).expect("create");
    let start = flash.file_io().expect("file media count their calls");
    for number in 0..4u8 {
        flash
            .program(
                0,
                block.page(u32::from(number)),
                Purpose::UserData,
                &page(number),
                &[number; 8],
            )
            .expect("program");
    }
    let programmed = flash.file_io().expect("counted");
    assert_eq!(
        programmed.writes - start.writes,
        4,
        "one write per page programmed"
    );
    let mut back = page(0);
    let mut oob = [0u8; 8];
    for number in 0..4u8 {
        flash
            .read(
                0,
                block.page(u32::from(number)),
                Purpose::UserData,
                &mut back,
                &mut oob,
            )
            .expect("read");
        assert_eq!(back, page(number));
        assert_eq!(oob, [number; 8]);
    }
    let read = flash.file_io().expect("counted");
    assert_eq!(read.reads - programmed.reads, 4, "one read per page read");
    assert_eq!(read.writes, programmed.writes, "reads write nothing");
    flash.sync().expect("sync");
    assert_eq!(flash.file_io().expect("counted").syncs, read.syncs + 1);
    // An erase is one write of its block table entry; the pages keep their old bytes, and their
    // trailers, older than the erase, no longer count.
    flash.erase(0, block, Purpose::UserData).expect("erase");
    assert_eq!(flash.file_io().expect("counted").writes, read.writes + 1);
    drop(flash);
    let reopened = Flash::open(&path, None, None).expect("reopen");
    assert_eq!(
        reopened.programmed_pages(block).expect("block"),
        0,
        "erased stays erased"
    );
    assert!(Flash::new(geometry(), None)
        .expect("ram")
        .file_io()
        .is_none());
}

#[test]
fn file_media_index_page_cache_serves_repeat_reads_and_forgets_erased_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let block = BlockAddress { die: 1, block: 1 };
    let mut flash = Flash::create(&path, geometry(), None).expect("create");
    let slot_bytes = u64::from(geometry().page_bytes) + u64::from(geometry().oob_bytes);
    assert!(
        flash.set_index_cache_bytes(4 * slot_bytes),
        "file media take a cache"
    );
    flash
        .program(0, block.page(0), Purpose::Index, &page(1), &[9; 4])
        .expect("program");
    let mut back = page(0);
    let mut oob = [0u8; 4];
    let before = flash.file_io().expect("counted").reads;
    for _ in 0..3 {
        flash
            .read(0, block.page(0), Purpose::Index, &mut back, &mut oob)
            .expect("read");
        assert_eq!((back.as_slice(), oob), (page(1).as_slice(), [9; 4]));
    }
    assert_eq!(
        flash.file_io().expect("counted").reads,
        before + 1,
        "one pread, then hits"
    );
    let stats = flash.index_cache_stats().expect("a cache");
    assert_eq!((stats.hits, stats.misses, stats.pages), (2, 1, 1));
    // Other purposes go to the file every time.
    flash
        .read(0, block.page(0), Purpose::UserData, &mut back, &mut oob)
        .expect("read");
    assert_eq!(flash.file_io().expect("counted").reads, before + 2);
    // An erase forgets the block's pages; what is programmed next is what a read returns.
    flash.erase(0, block, Purpose::Gc).expect("erase");
    assert_eq!(flash.index_cache_stats().expect("a cache").pages, 0);
    assert!(matches!(
        flash.read(0, block.page(0), Purpose::Index, &mut back, &mut oob),
        Err(FlashError::ReadErased { .. })
    ));
    flash
        .program(0, block.page(0), Purpose::Index, &page(2), &[7; 4])
        .expect("program");
    flash
        .read(0, block.page(0), Purpose::Index, &mut back, &mut oob)
        .expect("read");
    assert_eq!((back.as_slice(), oob), (page(2).as_slice(), [7; 4]));
    // Memory media keep no cache.
    let mut ram = Flash::new(geometry(), None).expect("ram");
    assert!(!ram.set_index_cache_bytes(1 << 20));
    assert!(ram.index_cache_stats().is_none());
}

/// The flags the kernel reports for the descriptors this process holds on `path`.
fn open_flags(path: &std::path::Path) -> Vec<u32> {
    let path = fs::canonicalize(path).expect("canonical path");
    let mut flags = Vec::new();
    for entry in fs::read_dir("/proc/self/fd").expect("/proc/self/fd") {
        let entry = entry.expect("fd entry");
        if fs::read_link(entry.path()).ok().as_deref() != Some(path.as_path()) {
            continue;
        }
        let info = fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            entry.file_name().to_string_lossy()
        ))
        .expect("fdinfo");
        let octal = info
            .lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .expect("a flags line");
        flags.push(u32::from_str_radix(octal.trim(), 8).expect("octal flags"));
    }
    flags
}

#[test]
fn file_media_read_without_updating_the_access_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("device.kvssd");
    let noatime = rustix::fs::OFlags::NOATIME.bits();
    for how in ["created", "opened"] {
        let flash = match how {
            "created" => Flash::create(&path, geometry(), None).expect("create"),
            _ => Flash::open(&path, None, None).expect("open"),
        };
        let flags = open_flags(&path);
        assert_eq!(flags.len(), 1, "one descriptor on the image");
        assert_ne!(
            flags[0] & noatime,
            0,
            "{how} with O_NOATIME: {:o}",
            flags[0]
        );
        drop(flash);
        assert!(open_flags(&path).is_empty());
    }
}

//! GC's victim pick against a pick that checks every block first, on the `test_min` geometry.

use super::super::*;
use super::{space, space_with};
use kvssd_flash::Purpose;
use proptest::collection::vec;
use proptest::prelude::*;

/// GC's pick as it was before blocks were scored from their records alone: every check on
/// every block first, the erase count read from the flash. The reference the pick must
/// agree with.
fn pick_by_scan(
    space: &Space,
    namespace: Option<u32>,
    allow: impl Fn(Stream, u64) -> bool,
) -> Option<u64> {
    let block_bytes = space.geometry.block_bytes();
    let (least, most) = space.flash.erase_count_range();
    let mut best: Option<(f64, usize, u64, u64)> = None;
    for (index, info) in space.blocks.iter().enumerate() {
        let BlockUse::Used(stream) = info.usage else {
            continue;
        };
        let address = space.block_address(index as u64);
        if info.valid_bytes >= block_bytes
            || namespace.is_some_and(|namespace| namespace != info.owner)
            || !allow(stream, info.valid_bytes)
            || space.is_protected(index as u64)
            || space.flash.programmed_pages(address).unwrap_or(0) != space.geometry.pages_per_block
        {
            continue;
        }
        let erase_count = space.flash.erase_count(address).unwrap_or(0);
        let wear = f64::from(erase_count - least) / f64::from(most - least + 1);
        let score = info.valid_bytes as f64 / block_bytes as f64 + 0.1 * wear;
        let free_on_die = space.free_by_die[address.die as usize].len();
        let candidate = (score, free_on_die, info.allocated, index as u64);
        let better = best.is_none_or(|best| {
            (candidate.0.total_cmp(&best.0))
                .then(candidate.1.cmp(&best.1))
                .then(candidate.2.cmp(&best.2))
                .is_lt()
        });
        if better {
            best = Some(candidate);
        }
    }
    best.map(|(_, _, _, index)| index)
}

#[derive(Debug, Clone)]
enum Step {
    Record { namespace: u32, len: usize },
    Meta { namespace: u32 },
    Invalidate(usize),
    Protect(u32),
    Unprotect(usize),
    Collect,
    Wear(usize, u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u32..2, prop_oneof![4 => 0usize..200, 1 => 0usize..700])
            .prop_map(|(namespace, len)| Step::Record { namespace, len }),
        2 => (0u32..2).prop_map(|namespace| Step::Meta { namespace }),
        5 => any::<usize>().prop_map(Step::Invalidate),
        1 => (0u32..2).prop_map(Step::Protect),
        1 => any::<usize>().prop_map(Step::Unprotect),
        2 => Just(Step::Collect),
        1 => (any::<usize>(), 1u8..40).prop_map(|(pick, erases)| Step::Wear(pick, erases)),
    ]
}

/// What a test wrote and has not invalidated: a record or a meta page.
enum Live {
    Record(RecordPointer, usize, usize),
    Meta(PageIndex),
}

impl Live {
    fn block(&self, per_block: u64) -> u64 {
        match self {
            Live::Record(pointer, _, _) => pointer.page().0 / per_block,
            Live::Meta(page) => page.0 / per_block,
        }
    }
}

/// A block with less valid but more wear loses to one a page fuller: wear, read from the
/// block's record, decides.
#[test]
fn a_fuller_younger_block_beats_an_emptier_worn_one() {
    let mut space = space_with(1, 4);
    let geometry = *space.geometry();
    let page = vec![3u8; geometry.page_bytes as usize];
    let fill = |space: &mut Space| {
        let pages: Vec<PageIndex> = (0..geometry.pages_per_block)
            .map(|_| {
                space
                    .write_meta(0, Purpose::Index, 0, &page)
                    .expect("write")
                    .0
            })
            .collect();
        let block = pages[0].0 / u64::from(geometry.pages_per_block);
        assert!(pages
            .iter()
            .all(|p| p.0 / u64::from(geometry.pages_per_block) == block));
        for &page in &pages[1..] {
            space.invalidate_meta(page);
        }
        (block, pages[0])
    };
    // The younger block: one page valid, a share of 1/8, never erased.
    let (younger, _) = fill(&mut space);
    for block in 0..geometry.blocks_total() {
        if space.blocks[block as usize].usage == BlockUse::Free {
            for _ in 0..40 {
                let address = space.block_address(block);
                space.flash.erase(0, address, Purpose::Gc).expect("erase");
            }
        }
    }
    // The worn block: 400 bytes valid, erased 40 times.
    let (worn, first) = fill(&mut space);
    space.invalidate_meta_bytes(first, u64::from(geometry.page_bytes) - 400);
    assert_eq!(space.blocks[worn as usize].valid_bytes, 400);
    assert_eq!(space.blocks[younger as usize].valid_bytes, 512);
    assert_eq!(pick_by_scan(&space, None, |_, _| true), Some(younger));
    assert_eq!(space.pick_victim(), Some(younger));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// After any sequence of writes, invalidations, snapshots, wear and erases, the pick is
    /// what checking every block first picks, for every filter GC uses.
    #[test]
    fn pick_matches_checking_every_block_first(steps in vec(step(), 1..800)) {
        let mut space = space();
        let per_block = u64::from(space.geometry().pages_per_block);
        let page = vec![3u8; space.geometry().page_bytes as usize];
        let mut live: Vec<Live> = Vec::new();
        let mut tokens: Vec<(u32, u64)> = Vec::new();
        for step in steps {
            match step {
                Step::Record { namespace, len } => {
                    if space.free_blocks() <= 6 {
                        continue;
                    }
                    let value = vec![1u8; len];
                    let (pointer, _) = space
                        .append_record(0, Purpose::UserData, namespace, b"key", &value)
                        .expect("append");
                    live.push(Live::Record(pointer, 3, len));
                }
                Step::Meta { namespace } => {
                    if space.free_blocks() <= 6 {
                        continue;
                    }
                    let (written, _) = space
                        .write_meta(0, Purpose::Index, namespace, &page)
                        .expect("write");
                    live.push(Live::Meta(written));
                }
                Step::Invalidate(pick) if !live.is_empty() => {
                    match live.swap_remove(pick % live.len()) {
                        Live::Record(pointer, key, value) => {
                            space.invalidate_record(pointer, key, value);
                        }
                        Live::Meta(page) => space.invalidate_meta(page),
                    }
                }
                Step::Invalidate(_) => {}
                Step::Protect(namespace) => {
                    tokens.push((namespace, space.protect(namespace)));
                }
                Step::Unprotect(pick) if !tokens.is_empty() => {
                    let (namespace, token) = tokens.swap_remove(pick % tokens.len());
                    space.unprotect(namespace, token);
                }
                Step::Unprotect(_) => {}
                // Erases a free block a few times, so that wear, not only valid bytes, sets
                // the winner.
                Step::Wear(pick, erases) => {
                    let blocks = space.geometry().blocks_total();
                    let block = (pick as u64) % blocks;
                    if space.blocks[block as usize].usage == BlockUse::Free {
                        let address = space.block_address(block);
                        for _ in 0..erases {
                            space.flash.erase(0, address, Purpose::Gc).expect("erase");
                        }
                    }
                }
                Step::Collect => {
                    if let Some(victim) = space.pick_victim() {
                        space.read_victim(0, victim).expect("read victim");
                        space.erase_victim(0, victim).expect("erase victim");
                        live.retain(|item| item.block(per_block) != victim);
                    }
                }
            }
            prop_assert_eq!(space.pick_victim(), pick_by_scan(&space, None, |_, _| true));
            for namespace in [Some(0), Some(1)] {
                let meta = |stream: Stream, _| stream == Stream::Meta;
                prop_assert_eq!(
                    space.pick_victim_with(namespace, meta),
                    pick_by_scan(&space, namespace, meta)
                );
                let half = |_, valid: u64| valid <= space.geometry().block_bytes() / 2;
                prop_assert_eq!(
                    space.pick_victim_with(namespace, half),
                    pick_by_scan(&space, namespace, half)
                );
            }
        }
    }
}

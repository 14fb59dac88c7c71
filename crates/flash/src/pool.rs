//! Slots of host memory for compact media's encodings and their blocks' page tables, carved from
//! large anonymous mappings that the kernel is asked to back with transparent huge pages.
//!
//! At PinK's scale the encodings take over 5 GiB, and a request reads random places in them, one
//! after another. In 4 KiB pages every such read also misses the TLB, and the walk of the page
//! tables misses the caches in turn; in 2 MiB pages the walk is short and its entries stay
//! cached (docs/design.md, "What bounds a GET's wall time"). The allocator's own memory does not
//! stay in huge pages: returning freed pages to the kernel splits them. A pool keeps its slots
//! until the media are dropped and hands freed ones out again first, so its mappings stay whole;
//! it holds what the media held at their most, as the allocator did before it returned pages.

use memmap2::MmapMut;

/// Bytes a mapping holds at most: 16 huge pages of 2 MiB. A mapping holds the largest power of two
/// of slots that fits (2,048 of 14 KiB, 4,096 of 8 KiB), so that a slot's number gives its mapping
/// and place by a shift and a mask.
const REGION_BYTES: usize = 32 << 20;

/// Which slot of a [`SlotPool`]: its number in the order the pool carved them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(u32);

impl Slot {
    /// The slot's number, to keep in a table.
    pub(crate) fn number(self) -> u32 {
        self.0
    }

    /// The slot numbered `number` ([`Slot::number`]).
    pub(crate) fn from_number(number: u32) -> Slot {
        Slot(number)
    }
}

/// Slots of one size, carved from mappings as needed and reused once freed.
pub(crate) struct SlotPool {
    slot_bytes: usize,
    /// Slots a mapping holds: `1 << region_shift`.
    region_shift: u32,
    regions: Vec<MmapMut>,
    /// Slots carved so far; the ones past it in the last region are untouched.
    carved: usize,
    /// Slots freed, handed out again before any is carved.
    free: Vec<Slot>,
}

impl SlotPool {
    /// A pool of slots of `slot_bytes` (at least one byte), with nothing mapped yet.
    pub(crate) fn new(slot_bytes: usize) -> SlotPool {
        let slot_bytes = slot_bytes.max(1);
        SlotPool {
            slot_bytes,
            region_shift: (REGION_BYTES / slot_bytes).max(1).ilog2(),
            regions: Vec::new(),
            carved: 0,
            free: Vec::new(),
        }
    }

    /// Bytes of a slot.
    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// A slot nobody holds, its bytes unspecified. Panics if the host cannot map memory, as an
    /// allocation that fails aborts.
    pub(crate) fn take(&mut self) -> Slot {
        if let Some(slot) = self.free.pop() {
            return slot;
        }
        if self.carved == self.regions.len() << self.region_shift {
            self.regions.push(map(self.slot_bytes << self.region_shift));
        }
        let slot = Slot(u32::try_from(self.carved).expect("fewer than 2^32 slots"));
        self.carved += 1;
        slot
    }

    /// Returns `slot` for reuse; its holder no longer reads it.
    pub(crate) fn give(&mut self, slot: Slot) {
        debug_assert!((slot.0 as usize) < self.carved, "a slot the pool gave");
        self.free.push(slot);
    }

    /// Slot `slot`'s bytes.
    pub(crate) fn bytes(&self, slot: Slot) -> &[u8] {
        let (region, at) = self.locate(slot);
        &self.regions[region][at..at + self.slot_bytes]
    }

    /// Slot `slot`'s bytes, to write.
    pub(crate) fn bytes_mut(&mut self, slot: Slot) -> &mut [u8] {
        let (region, at) = self.locate(slot);
        &mut self.regions[region][at..at + self.slot_bytes]
    }

    /// Bytes mapped: every slot carved or still to carve in the mappings made.
    #[cfg(test)]
    fn mapped_bytes(&self) -> u64 {
        self.regions.iter().map(|region| region.len() as u64).sum()
    }

    /// Slots carved so far (held or freed).
    #[cfg(test)]
    pub(crate) fn carved(&self) -> usize {
        self.carved
    }

    fn locate(&self, slot: Slot) -> (usize, usize) {
        let number = slot.0 as usize;
        (
            number >> self.region_shift,
            (number & ((1 << self.region_shift) - 1)) * self.slot_bytes,
        )
    }
}

/// An anonymous mapping of `bytes`, advised to be backed by transparent huge pages where the
/// kernel offers them (elsewhere, and where the advice is refused, it is ordinary memory).
fn map(bytes: usize) -> MmapMut {
    let region = MmapMut::map_anon(bytes).unwrap_or_else(|error| {
        panic!("compact media: cannot map {bytes} bytes of host memory: {error}")
    });
    #[cfg(target_os = "linux")]
    {
        // Advice only: without huge pages the media are slower, not wrong.
        let _ = region.advise(memmap2::Advice::HugePage);
    }
    region
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_their_bytes_apart_and_freed_ones_come_back_first() {
        let mut pool = SlotPool::new(14 << 10);
        assert_eq!(
            pool.mapped_bytes(),
            0,
            "nothing mapped before the first slot"
        );
        let slots: Vec<Slot> = (0..5).map(|_| pool.take()).collect();
        // 2,048 slots of 14 KiB: 28 MiB.
        assert_eq!(pool.mapped_bytes(), 28 << 20);
        for (seed, &slot) in slots.iter().enumerate() {
            pool.bytes_mut(slot).fill(seed as u8);
        }
        for (seed, &slot) in slots.iter().enumerate() {
            assert!(pool.bytes(slot).iter().all(|&byte| byte == seed as u8));
            assert_eq!(pool.bytes(slot).len(), 14 << 10);
        }
        pool.give(slots[3]);
        pool.give(slots[1]);
        assert_eq!(pool.take(), slots[1]);
        assert_eq!(pool.take(), slots[3]);
        assert_eq!(pool.take(), Slot(5), "then the next slot not yet carved");
    }

    #[test]
    fn a_pool_maps_another_region_when_its_slots_are_all_held() {
        // Slots of 8 MiB: four to a region.
        let mut pool = SlotPool::new(8 << 20);
        assert_eq!(pool.region_shift, 2);
        let slots: Vec<Slot> = (0..5).map(|_| pool.take()).collect();
        assert_eq!(pool.mapped_bytes(), 2 * REGION_BYTES as u64);
        pool.bytes_mut(slots[4]).fill(7);
        pool.bytes_mut(slots[3]).fill(3);
        assert!(pool.bytes(slots[4]).iter().all(|&byte| byte == 7));
        assert!(pool.bytes(slots[3]).iter().all(|&byte| byte == 3));
    }
}

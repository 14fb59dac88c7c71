//! Named device profiles: a geometry with a timing profile.

use crate::{Geometry, TimingProfile};

/// A named geometry and timing profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The name users type (`--profile NAME`).
    pub name: &'static str,
    /// The shape of the array.
    pub geometry: Geometry,
    /// Its timing.
    pub timing: TimingProfile,
}

/// Blocks per die of the `pink` profile: 8 x 8 dies x 512 blocks x 256 pages x 8 KiB = 64 GiB, the
/// capacity PinK's evaluation scales its card down to (§5.1).
pub const PINK_BLOCKS_PER_DIE: u32 = 512;

impl Profile {
    /// Names accepted by [`Profile::by_name`].
    pub const NAMES: [&'static str; 2] = ["pink", "test_min"];

    /// PinK's card: 8 channels x 8 ways, 8 KiB pages, 256 pages per block, 256 B OOB, 64 GiB.
    pub fn pink() -> Profile {
        Profile::pink_with_blocks(PINK_BLOCKS_PER_DIE)
    }

    /// PinK's card with another capacity, chosen by blocks per die.
    pub fn pink_with_blocks(blocks_per_die: u32) -> Profile {
        Profile {
            name: "pink",
            geometry: Geometry {
                channels: 8,
                ways_per_channel: 8,
                blocks_per_die,
                pages_per_block: 256,
                page_bytes: 8192,
                oob_bytes: 256,
            },
            timing: TimingProfile::pink(),
        }
    }

    /// A tiny array for tests that must see GC and compaction within a few hundred operations:
    /// 2 channels x 2 ways x 16 blocks x 8 pages of 512 B (256 KiB), with PinK's timing.
    pub fn test_min() -> Profile {
        Profile {
            name: "test_min",
            geometry: Geometry {
                channels: 2,
                ways_per_channel: 2,
                blocks_per_die: 16,
                pages_per_block: 8,
                page_bytes: 512,
                oob_bytes: 64,
            },
            timing: TimingProfile::pink(),
        }
    }

    /// The profile with a name, if there is one.
    pub fn by_name(name: &str) -> Option<Profile> {
        match name {
            "pink" => Some(Profile::pink()),
            "test_min" => Some(Profile::test_min()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_named_profiles_are_valid() {
        for name in Profile::NAMES {
            let profile = Profile::by_name(name).expect("named profile exists");
            assert_eq!(profile.name, name);
            profile.geometry.validate().expect("valid geometry");
        }
        assert_eq!(Profile::pink().geometry.capacity_bytes(), 64 << 30);
        assert!(Profile::by_name("nope").is_none());
    }
}

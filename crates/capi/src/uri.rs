//! Device URIs: what `kvs_open_device` is given.
//!
//! ```text
//! PATH[?OPTIONS]            a device kept in a file (or block device)
//! file:PATH[?OPTIONS]       the same, for a path that contains '?' before its options
//! sim:PROFILE[?OPTIONS]     a simulated card in memory (PROFILE: pink or test_min)
//! ```
//!
//! Options are `NAME=VALUE` (or a bare `NAME` for a flag) joined by `&`:
//!
//! | option | applies to | meaning |
//! | --- | --- | --- |
//! | `create` | file | format the file if it does not exist (a flag, or `create=1`) |
//! | `profile=P` | file | the geometry a new file gets: `pink` (default) or `test_min` |
//! | `blocks-per-die=N` | both | the card's size (PinK's default 512, i.e. 64 GiB; N x 128 MiB) |
//! | `pacing` | sim | complete each command no sooner on the wall clock than on the simulated one |
//! | `queue-depth=N` | both | asynchronous commands in flight at once (1 to 4096) |
//!
//! Every limit is checked here; a bad URI is refused with a one-line reason.

use std::path::PathBuf;

use kvssd_flash::Profile;

/// Most asynchronous commands in flight on one device.
pub const QUEUE_DEPTH_MAX: usize = 4096;
/// The default queue depth (OpenMPDK's default `[aio] queue_depth`).
pub const QUEUE_DEPTH_DEFAULT: usize = 64;
/// The environment variable OpenMPDK reads the queue depth from; a URI option wins over it.
pub const QUEUE_DEPTH_ENV: &str = "KVSSD_QUEUE_DEPTH";
/// Most blocks per die a URI may ask for (the flash layer's own limit is checked as well).
const BLOCKS_PER_DIE_MAX: u32 = 1 << 20;

/// Where the device lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Media {
    /// A file or block device.
    File {
        /// Its path.
        path: PathBuf,
        /// Format it if it does not exist.
        create: bool,
    },
    /// A simulated card in memory.
    Simulated {
        /// Pace commands to the simulated clock.
        pacing: bool,
    },
}

/// A parsed device URI.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceUri {
    /// Where the device lives.
    pub media: Media,
    /// Its geometry and timing (for a file: only used when the file is created).
    pub profile: Profile,
    /// Asynchronous commands in flight at once.
    pub queue_depth: usize,
}

fn parse_number(name: &str, value: &str, max: u64) -> Result<u64, String> {
    let number: u64 = value
        .parse()
        .map_err(|_| format!("option {name}={value}: not a number"))?;
    if number == 0 || number > max {
        return Err(format!("option {name}={value}: must be 1 to {max}"));
    }
    Ok(number)
}

fn required<'a>(name: &str, value: Option<&'a str>) -> Result<&'a str, String> {
    value.ok_or_else(|| format!("option {name} needs a value ({name}=...)"))
}

fn parse_flag(name: &str, value: Option<&str>) -> Result<bool, String> {
    match value {
        None | Some("1") | Some("on") | Some("true") => Ok(true),
        Some("0") | Some("off") | Some("false") => Ok(false),
        Some(other) => Err(format!("option {name}={other}: expected on or off")),
    }
}

/// The queue depth `KVSSD_QUEUE_DEPTH` asks for, if it is set.
fn queue_depth_from_environment() -> Result<Option<usize>, String> {
    match std::env::var(QUEUE_DEPTH_ENV) {
        Ok(value) => parse_number(QUEUE_DEPTH_ENV, &value, QUEUE_DEPTH_MAX as u64)
            .map(|depth| Some(depth as usize)),
        Err(_) => Ok(None),
    }
}

impl DeviceUri {
    /// Parses a URI; the error is a one-line reason.
    pub fn parse(uri: &str) -> Result<DeviceUri, String> {
        if uri.is_empty() {
            return Err("the URI is empty".into());
        }
        let (simulated, rest) = if let Some(rest) = uri.strip_prefix("sim:") {
            (true, rest)
        } else if let Some(rest) = uri.strip_prefix("file:") {
            (false, rest)
        } else {
            (false, uri)
        };
        let (target, options) = match rest.rsplit_once('?') {
            Some((target, options)) => (target, options),
            None => (rest, ""),
        };
        if target.is_empty() {
            return Err(format!("{uri}: no path or profile"));
        }
        let mut profile_name = if simulated { target } else { "pink" };
        let mut blocks_per_die = None;
        let mut pacing = false;
        let mut create = false;
        let mut queue_depth = None;
        for option in options.split('&').filter(|option| !option.is_empty()) {
            let (name, value) = match option.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (option, None),
            };
            match name {
                "blocks-per-die" => {
                    let value = required(name, value)?;
                    blocks_per_die =
                        Some(parse_number(name, value, u64::from(BLOCKS_PER_DIE_MAX))? as u32);
                }
                "queue-depth" => {
                    let value = required(name, value)?;
                    queue_depth = Some(parse_number(name, value, QUEUE_DEPTH_MAX as u64)? as usize);
                }
                "pacing" if simulated => pacing = parse_flag(name, value)?,
                "create" if !simulated => create = parse_flag(name, value)?,
                "profile" if !simulated => profile_name = required(name, value)?,
                "pacing" => return Err("option pacing applies to simulated devices only".into()),
                "create" | "profile" => {
                    return Err(format!(
                        "option {name} applies to file devices only (a simulated device is new at every open)"
                    ))
                }
                other => return Err(format!("unknown option {other}")),
            }
        }
        let mut profile = Profile::by_name(profile_name).ok_or_else(|| {
            format!(
                "unknown profile {profile_name} (expected one of {})",
                Profile::NAMES.join(", ")
            )
        })?;
        if let Some(blocks_per_die) = blocks_per_die {
            profile.geometry.blocks_per_die = blocks_per_die;
            profile
                .geometry
                .validate()
                .map_err(|error| format!("blocks-per-die={blocks_per_die}: {error}"))?;
        }
        let queue_depth = match queue_depth {
            Some(depth) => depth,
            None => queue_depth_from_environment()?.unwrap_or(QUEUE_DEPTH_DEFAULT),
        };
        let media = if simulated {
            Media::Simulated { pacing }
        } else {
            Media::File {
                path: PathBuf::from(target),
                create,
            }
        };
        Ok(DeviceUri {
            media,
            profile,
            queue_depth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_forms_and_options() {
        let uri = DeviceUri::parse("sim:pink?blocks-per-die=32&pacing&queue-depth=8").expect("sim");
        assert_eq!(uri.media, Media::Simulated { pacing: true });
        assert_eq!(uri.profile.geometry.blocks_per_die, 32);
        assert_eq!(uri.queue_depth, 8);
        let uri = DeviceUri::parse("/tmp/dev.img?create&profile=test_min").expect("file");
        assert_eq!(
            uri.media,
            Media::File {
                path: PathBuf::from("/tmp/dev.img"),
                create: true
            }
        );
        assert_eq!(uri.profile.name, "test_min");
        let uri = DeviceUri::parse("file:/tmp/odd?name.img?create=0").expect("file: prefix");
        assert_eq!(
            uri.media,
            Media::File {
                path: PathBuf::from("/tmp/odd?name.img"),
                create: false
            }
        );
        assert_eq!(uri.profile.name, "pink");
    }

    #[test]
    fn uri_refuses_what_it_cannot_honour() {
        for (uri, reason) in [
            ("", "empty"),
            ("sim:", "no path or profile"),
            ("sim:nand", "unknown profile nand"),
            ("sim:pink?create", "file devices only"),
            ("/tmp/x.img?pacing", "simulated devices only"),
            ("sim:pink?blocks-per-die=0", "must be 1 to"),
            ("sim:pink?blocks-per-die=x", "not a number"),
            ("sim:pink?queue-depth=5000", "must be 1 to 4096"),
            ("sim:pink?queue-depth", "needs a value"),
            ("sim:pink?pacing=maybe", "expected on or off"),
            ("sim:pink?colour=blue", "unknown option colour"),
        ] {
            let error = DeviceUri::parse(uri).expect_err(uri);
            assert!(error.contains(reason), "{uri}: {error}");
        }
    }
}

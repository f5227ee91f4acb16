//! The seeded mutation loop over the Python fixtures: every mutant is read or refused clearly,
//! none panics, none makes the reader allocate what its header claims.

use super::*;

/// xorshift64*: the same mutants on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The mutation classes, each a function of the seed file's bytes.
const CLASSES: &[&str] = &[
    "byte flip in the header",
    "byte flip in the data",
    "truncation",
    "appended bytes",
    "header length rewritten",
    "number in the header replaced",
    "dtype replaced",
    "header text deleted or inserted",
    "header entry duplicated",
    "metadata value replaced",
    "non-UTF-8 in the header",
    "NaN payload in the data",
];

/// Edits the header text of `seed` with `edit` and rewrites the length.
fn with_header(seed: &[u8], edit: impl FnOnce(&str) -> String) -> Vec<u8> {
    let n = u64::from_le_bytes(seed[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&seed[8..8 + n]).unwrap();
    raw(&edit(header), &seed[8 + n..])
}

fn mutate(rng: &mut Rng, class: usize, seed: &[u8]) -> Vec<u8> {
    let n = u64::from_le_bytes(seed[..8].try_into().unwrap()) as usize;
    let mut bytes = seed.to_vec();
    match class {
        0 => {
            for _ in 0..1 + rng.below(3) {
                let at = 8 + rng.below(n);
                bytes[at] = rng.next() as u8;
            }
        }
        1 => {
            for _ in 0..1 + rng.below(3) {
                let at = 8 + n + rng.below(bytes.len() - 8 - n);
                bytes[at] ^= 1 << rng.below(8);
            }
        }
        2 => bytes.truncate(rng.below(bytes.len())),
        3 => bytes.extend((0..1 + rng.below(64)).map(|_| rng.next() as u8)),
        4 => {
            let claims = [
                0,
                1,
                7,
                n as u64 - 1,
                n as u64 + 1,
                n as u64 + 8,
                u64::MAX,
                1 << 40,
            ];
            let claim = if rng.below(2) == 0 {
                *rng.pick(&claims)
            } else {
                rng.next()
            };
            bytes[..8].copy_from_slice(&claim.to_le_bytes());
        }
        5 => {
            let numbers = [
                "0",
                "-1",
                "1e15",
                "4000000000000000",
                "18446744073709551615",
                "18446744073709551616",
                "4294967296",
                "2.5",
                "null",
                "\"3\"",
                "[]",
            ];
            let replacement = rng.pick(&numbers).to_string();
            let pick = rng.next();
            bytes = with_header(seed, |h| {
                let digits: Vec<usize> = h
                    .char_indices()
                    .filter(|(i, c)| {
                        c.is_ascii_digit()
                            && (*i == 0 || !h.as_bytes()[i - 1].is_ascii_digit())
                            && h.as_bytes().get(i.wrapping_sub(1)) != Some(&b'.')
                    })
                    .map(|(i, _)| i)
                    .collect();
                if digits.is_empty() {
                    return h.to_string();
                }
                let at = digits[(pick % digits.len() as u64) as usize];
                let end = h[at..]
                    .find(|c: char| !c.is_ascii_digit())
                    .map_or(h.len(), |e| at + e);
                format!("{}{replacement}{}", &h[..at], &h[end..])
            });
        }
        6 => {
            let dtypes = [
                "F16", "BF16", "I32", "U8", "BOOL", "F64", "I64", "F32", "F4", "C64", "X",
            ];
            let to = rng.pick(&dtypes).to_string();
            let which = rng.below(4);
            bytes = with_header(seed, |h| {
                let mut parts: Vec<String> = h.split("\"dtype\":\"").map(String::from).collect();
                let i = 1 + which % (parts.len() - 1).max(1);
                if let Some(part) = parts.get_mut(i)
                    && let Some(end) = part.find('"')
                {
                    *part = format!("{to}{}", &part[end..]);
                }
                parts.join("\"dtype\":\"")
            });
        }
        7 => {
            let at = rng.below(n);
            let len = rng.below(8);
            let insert = *rng.pick(&["", "{", "}", "\"", ",", ":", "\\", "[", "]", "\u{e9}"]);
            bytes = with_header(seed, |h| {
                let at = (0..=at).rev().find(|&i| h.is_char_boundary(i)).unwrap_or(0);
                let end = (at + len..=h.len())
                    .find(|&i| h.is_char_boundary(i))
                    .unwrap_or(h.len());
                format!("{}{insert}{}", &h[..at], &h[end..])
            });
        }
        8 => {
            let which = rng.below(5);
            bytes = with_header(seed, |h| {
                // an entry `"name":{...}` (no nested objects but the metadata) put in again
                let starts: Vec<usize> = h.match_indices(",\"").map(|(i, _)| i).collect();
                let Some(&start) = starts.get(which % starts.len().max(1)) else {
                    return h.to_string();
                };
                let Some(end) = h[start + 1..].find('}').map(|e| start + 1 + e + 1) else {
                    return h.to_string();
                };
                let entry = h[start..end].to_string();
                let close = h.trim_end().len() - 1;
                format!("{}{entry}{}", &h[..close], &h[close..])
            });
        }
        9 => {
            let values = ["", "trace", "init", "2", "1", "0", "\\u0000", "\u{1F600}"];
            let value = rng.pick(&values).to_string();
            let key = *rng.pick(&["burnside.format", "burnside.version"]);
            bytes = with_header(seed, |h| {
                let needle = format!("\"{key}\":\"");
                let Some(at) = h.find(&needle).map(|i| i + needle.len()) else {
                    return h.to_string();
                };
                let end = at + h[at..].find('"').unwrap();
                format!("{}{value}{}", &h[..at], &h[end..])
            });
        }
        10 => {
            let at = 8 + rng.below(n);
            bytes[at] = *rng.pick(&[0x80, 0xc3, 0xff, 0xfe, 0xed]);
        }
        _ => {
            let data = bytes.len() - 8 - n;
            let nan = *rng.pick(&[0x7fc0_0000_u32, 0xffc0_0000, 0x7f80_0001, 0xffff_ffff]);
            let at = 8 + n + 4 * rng.below(data / 4);
            bytes[at..at + 4].copy_from_slice(&nan.to_le_bytes());
        }
    }
    bytes
}

/// What one mutant did: read (and loaded), refused, or panicked (with the panic's message).
enum Outcome {
    Read,
    Refused,
    Panicked(String),
    Unclear(String),
}

fn try_mutant(path: &Path, device: &Device) -> Outcome {
    let run = catch_unwind(AssertUnwindSafe(|| -> Result<(), TraceError> {
        // The generic reader first (the trace fixture is no init file), then the init file's use.
        let read = SafetensorsFile::read(path);
        let init = InitFile::read(path);
        if let (Err(a), Err(b)) = (&read, &init)
            && a.to_string() != b.to_string()
            && !matches!(b, TraceError::Format { .. })
        {
            panic!("the two readers disagree: `{a}` and `{b}`");
        }
        let init = init?;
        for name in init.input_names() {
            let _ = init.float_input_at::<2>(0, name, device);
            let _ = init.int_input_at::<1>(0, name, device);
        }
        for step in 0..init.batches() + 1 {
            let _ = init.input_at(step, "x");
        }
        init.load_module(tiny(device)).map(|_| ())
    }));
    match run {
        Ok(Ok(())) => Outcome::Read,
        Ok(Err(error)) => {
            let message = error.to_string();
            let reader_error = matches!(
                error,
                TraceError::Io { .. } | TraceError::Safetensors { .. }
            ) || (matches!(error, TraceError::Format { .. })
                && !message.contains("does not fit this init file"));
            if reader_error
                && (!message.contains(&path.display().to_string()) || message.contains('\n'))
            {
                Outcome::Unclear(message)
            } else {
                Outcome::Refused
            }
        }
        Err(panic) => Outcome::Panicked(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        ),
    }
}

#[test]
fn seeded_mutants_of_the_fixtures_are_each_read_or_refused_clearly() {
    // 2,000 by default (half a second); BURNSIDE_FUZZ_MUTANTS=N and BURNSIDE_FUZZ_SEED=S explore further.
    let env = |key: &str| std::env::var(key).ok().and_then(|v| v.parse::<u64>().ok());
    let mutants = env("BURNSIDE_FUZZ_MUTANTS").map_or(2_000, |n| n as usize);
    let seeds = [
        ("tiny_init", tiny_init_bytes()),
        (
            "tiny_trace",
            std::fs::read(fixture("tiny_trace.safetensors")).unwrap(),
        ),
    ];
    let device = Device::default();
    let path = scratch("hostile", "mutant.safetensors");
    let mut rng = Rng(env("BURNSIDE_FUZZ_SEED").unwrap_or(0x6275_726e_7369_6465) | 1); // "burnside"
    let mut counts = vec![[0_usize; 3]; CLASSES.len()]; // read, refused, bad
    let mut bad = Vec::new();
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    for mutant in 0..mutants {
        let class = mutant % CLASSES.len();
        let (seed_name, seed) = &seeds[rng.below(seeds.len())];
        let bytes = mutate(&mut rng, class, seed);
        std::fs::write(&path, &bytes).unwrap();
        let (outcome, largest) = largest_allocation(|| try_mutant(&path, &device));
        let column = match &outcome {
            Outcome::Read => 0,
            Outcome::Refused => 1,
            Outcome::Panicked(_) | Outcome::Unclear(_) => 2,
        };
        counts[class][column] += 1;
        let name = format!("mutant {mutant} ({}, of {seed_name})", CLASSES[class]);
        match outcome {
            Outcome::Panicked(message) => bad.push(format!("{name} panicked: {message}")),
            Outcome::Unclear(message) => bad.push(format!("{name}: unclear error: {message}")),
            _ => {}
        }
        // The largest honest buffer is the file itself (a few hundred bytes) or burn's own.
        if largest > 1 << 24 {
            bad.push(format!("{name} allocated {largest} bytes at once"));
        }
        if !bad.is_empty() && bad.len() <= 3 {
            let keep = scratch("hostile", &format!("mutant-{mutant}.safetensors"));
            std::fs::write(keep, &bytes).unwrap();
        }
    }
    std::panic::set_hook(quiet);
    let elapsed = started.elapsed();
    for (class, [read, refused, failed]) in CLASSES.iter().zip(&counts) {
        println!("{class:36} {read:5} read {refused:5} refused {failed:3} bad");
    }
    println!("{mutants} mutants in {elapsed:?}");
    assert!(
        bad.is_empty(),
        "{} bad mutants:\n{}",
        bad.len(),
        bad.join("\n")
    );
    let refused: usize = counts.iter().map(|c| c[1]).sum();
    assert!(refused > mutants / 2, "most mutants are refused: {refused}");
}

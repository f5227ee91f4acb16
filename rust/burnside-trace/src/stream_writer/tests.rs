use super::*;
use crate::SafetensorsFile;

pub(super) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("burnside-stream-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn partials(path: &Path) -> Vec<String> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!(".{name}.")) && n.ends_with(".partial"))
        .collect()
}

fn meta() -> BTreeMap<String, String> {
    [("k".to_string(), "v".to_string())].into_iter().collect()
}

/// f32 tensors of odd lengths (4 mod 8 bytes) mixed with f64 and i64 ones.
fn mixed() -> Vec<(String, HostTensor)> {
    let f64s = |n: usize| HostTensor {
        dtype: HostDType::F64,
        shape: vec![n],
        bytes: (0..n)
            .flat_map(|i| (i as f64 * 0.5).to_le_bytes())
            .collect(),
    };
    vec![
        ("a.loss".into(), HostTensor::from_f32(&[0.25], vec![])),
        ("b.big".into(), f64s(20_000)),
        (
            "c.odd".into(),
            HostTensor::from_f32(&[1.0, 2.0, 3.0], vec![3]),
        ),
        ("d.f64".into(), f64s(3)),
        ("e.step".into(), HostTensor::from_i64(&[7], vec![])),
        ("f.even".into(), HostTensor::from_f32(&[1.0, -0.0], vec![2])),
    ]
}

#[test]
fn every_tensor_reads_back_and_8_byte_elements_are_8_aligned() {
    let path = scratch("aligned.safetensors");
    let mut writer = StreamWriter::create(&path, 6).unwrap();
    let temp = writer.temp().unwrap().to_path_buf();
    assert!(
        temp.file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with(".partial")
    );
    assert_eq!(temp.parent(), path.parent(), "beside the output");
    for (name, tensor) in mixed() {
        writer.add(name, tensor).unwrap();
    }
    assert!(!path.exists(), "nothing at the output before the finish");
    writer.finish(meta()).unwrap();
    assert!(!temp.exists());
    let file = SafetensorsFile::read(&path).unwrap();
    assert_eq!(file.tensors, mixed().into_iter().collect());
    assert_eq!(file.meta("k").unwrap(), "v");
    // the header: a multiple of 8, padded with spaces, the reservation's size
    let bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert_eq!(n, header_reserve(6));
    assert_eq!(n % 8, 0);
    assert_eq!(bytes[8 + n - 1], b' ');
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    for (name, entry) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        let start = entry["data_offsets"][0].as_u64().unwrap();
        let size = if entry["dtype"] == "F32" { 4 } else { 8 };
        assert_eq!((8 + n as u64 + start) % size, 0, "{name} at {start}");
    }
    let parsed = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(parsed.len(), 6);
}

#[test]
fn a_header_larger_than_its_room_is_written_by_copying_the_data() {
    let path = scratch("overflow.safetensors");
    let mut writer = StreamWriter::create_with_reserve(&path, 64).unwrap();
    let names: Vec<String> = (0..50).map(|i| format!("step{i}.params_after.w")).collect();
    let tensor = |i: usize| HostTensor::from_f32(&[i as f32, 1.0], vec![2]);
    for (i, name) in names.iter().enumerate() {
        writer.add(name.clone(), tensor(i)).unwrap();
    }
    writer
        .alias("step9.params_before.w".into(), &names[8])
        .unwrap();
    writer.finish(meta()).unwrap();
    assert!(partials(&path).is_empty(), "{:?}", partials(&path));
    let bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    assert!(n > 64 && n.is_multiple_of(8), "{n}");
    let file = SafetensorsFile::read(&path).unwrap();
    for (i, name) in names.iter().enumerate() {
        assert_eq!(file.tensors[name], tensor(i));
    }
    assert_eq!(file.meta("burnside.version").unwrap(), "2");
    assert_eq!(
        file.meta("aliases").unwrap(),
        r#"{"step9.params_before.w":"step8.params_after.w"}"#
    );
    assert_eq!(
        safetensors::SafeTensors::deserialize(&bytes).unwrap().len(),
        50
    );
}

#[test]
fn a_writer_dropped_unfinished_leaves_neither_output_nor_partial_and_keeps_the_old_file() {
    let path = scratch("dropped.safetensors");
    std::fs::write(&path, b"previous").unwrap();
    let mut writer = StreamWriter::create(&path, 1).unwrap();
    writer
        .add("x".into(), HostTensor::from_f32(&[1.0; 100], vec![100]))
        .unwrap();
    assert_eq!(partials(&path).len(), 1);
    drop(writer);
    assert!(partials(&path).is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), b"previous");
}

#[test]
fn duplicates_bad_names_and_aliases_to_nothing_are_refused() {
    let path = scratch("dupes.safetensors");
    let mut writer = StreamWriter::create(&path, 2).unwrap();
    let t = || HostTensor::from_f32(&[1.0, 2.0], vec![2]);
    writer.add("a".into(), t()).unwrap();
    writer
        .add("s".into(), HostTensor::from_f32(&[1.0], vec![]))
        .unwrap(); // held
    let again = writer.add("a".into(), t()).unwrap_err().to_string();
    assert!(again.starts_with("tensor `a`: recorded twice"), "{again}");
    assert!(writer.add("s".into(), t()).is_err(), "a held one counts");
    assert!(writer.add("__metadata__".into(), t()).is_err());
    assert!(writer.alias("b".into(), "missing").is_err());
    writer.alias("b".into(), "a").unwrap();
    assert!(
        writer.alias("c".into(), "b").is_err(),
        "never an alias of an alias"
    );
    assert!(
        writer.add("b".into(), t()).is_err(),
        "an alias's name is taken"
    );
    assert_eq!(writer.names().collect::<Vec<_>>(), vec!["a", "b", "s"]);
}

#[test]
fn statistics_entries_go_to_the_metadata_as_version_3_and_take_their_names() {
    let path = scratch("statistics.safetensors");
    let mut writer = StreamWriter::create(&path, 4).unwrap();
    let big = HostTensor::from_f32(&[1.0, -2.0, 0.5, 4.0], vec![2, 2]);
    let stats = Statistics::of(&big);
    writer
        .add("step0.params_after.w".into(), big.clone())
        .unwrap();
    writer
        .alias("step1.params_before.w".into(), "step0.params_after.w")
        .unwrap();
    writer
        .add_statistics("step1.params_after.w".into(), stats.clone())
        .unwrap();
    assert!(writer.contains("step1.params_after.w"));
    let again = writer.add("step1.params_after.w".into(), big.clone());
    assert!(again.unwrap_err().to_string().contains("recorded twice"));
    assert!(
        writer
            .alias("step2.params_before.w".into(), "step1.params_after.w")
            .is_err(),
        "statistics are no tensor an alias may name"
    );
    writer.finish(meta()).unwrap();
    let file = SafetensorsFile::read(&path).unwrap();
    assert_eq!(file.meta("burnside.version").unwrap(), "3");
    assert!(file.meta("aliases").is_ok(), "aliases kept beside");
    assert_eq!(file.tensors.len(), 1);
    let entries: Value = serde_json::from_str(file.meta("statistics").unwrap()).unwrap();
    assert_eq!(entries["step1.params_after.w"], stats.to_json());
    assert_eq!(
        entries["step1.params_after.w"]["xxh3"],
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&big.bytes))
    );
}

#[test]
fn a_missing_directory_is_an_io_error_naming_the_output() {
    let path = scratch("no/such/dir/trace.safetensors");
    let error = StreamWriter::create(&path, 1).unwrap_err();
    assert!(matches!(error, TraceError::Io { .. }));
    assert!(error.to_string().starts_with(&path.display().to_string()));
}

//! 64 KiB values rewritten over 256 keys: how large does the file get, how fast does it run?
//! Arguments: PATH [SECONDS=20] [off: no automatic rebuilds]; `SIZE=16384` in the
//! environment for values of another size (default 65536); `SYNC=n` for a hard sync after
//! every n sets (default: none).
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: overwrite-load PATH [SECONDS] [off]");
    let secs: f64 = args.get(2).map_or(20.0, |s| s.parse().expect("SECONDS"));
    let rebuilds = args.get(3).is_none_or(|s| s != "off");
    let _ = std::fs::remove_file(path);
    let mut builder = senju::Db::builder();
    if !rebuilds {
        builder = builder.auto_rebuild(None);
    }
    let db = builder.open(path).expect("open");
    let size: u32 = std::env::var("SIZE").map_or(65536, |s| s.parse().expect("SIZE"));
    let sync_every: u64 = std::env::var("SYNC").map_or(0, |s| s.parse().expect("SYNC"));
    let value: Vec<u8> = (0..size).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    for i in 0..256 {
        db.set(format!("{i:016}").as_bytes(), &value).expect("set");
    }
    let mut x: u64 = 1;
    let t0 = Instant::now();
    let (mut sets, mut next) = (0u64, 1.0);
    while t0.elapsed().as_secs_f64() < secs {
        if t0.elapsed().as_secs_f64() >= next {
            let st = db.stats().expect("stats");
            println!(
                "t={next:.0}s sets={sets} file={}MiB dead={}MiB free={}MiB passes={}",
                st.file_bytes >> 20,
                st.dead_bytes >> 20,
                st.free_bytes >> 20,
                st.auto_rebuilds
            );
            next += 1.0;
        }
        for _ in 0..4 {
            // xorshift: the same key sequence in every run.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = format!("{:016}", x % 256);
            db.set(key.as_bytes(), &value).expect("set");
            let got = db.get(key.as_bytes()).expect("get").expect("present");
            assert_eq!(got.len(), value.len());
            sets += 1;
            if sync_every > 0 && sets % sync_every == 0 {
                db.sync(senju::Durability::Hard).expect("sync");
            }
        }
    }
    let elapsed = t0.elapsed().as_secs_f64();
    println!("{:.0} set+get pairs/s ({sets} sets in {elapsed:.1} s)", sets as f64 / elapsed);
    db.close().expect("close");
    println!("file after close: {} MiB", std::fs::metadata(path).expect("stat").len() >> 20);
}

//! `kvssd bench tpcc`: TPC-C's NewOrder and Payment through the host layer (KAML §V-D, Fig. 9),
//! each run alone, on the KAML commit path and the conventional one, at several lock
//! granularities and cache hit ratios.
//!
//! **Schema** (TPC-C §1.3), one table each, keys the record number (8 bytes, big-endian) built
//! from the primary key, values 512 bytes except CUSTOMER's 1 KiB (KAML §V-D), numeric fields as
//! little-endian `i64` at fixed offsets (money in cents): WAREHOUSE (`scale` rows), DISTRICT
//! (10 per warehouse), CUSTOMER (3,000 per district), ITEM (100,000), STOCK (100,000 per
//! warehouse), ORDER, NEW-ORDER, ORDER-LINE and HISTORY. Departures from the specification, all
//! because these two transactions do not need them: ORDER, NEW-ORDER and ORDER-LINE start empty
//! (D_NEXT_O_ID = 1) rather than with 3,000 orders per district; Payment selects the customer
//! by number, never by last name (there is no secondary index); text fields are filler.
//!
//! **NewOrder** (TPC-C §2.4): the client's home warehouse, a district uniform in 1..10, a
//! customer NURand(1023, 1, 3000), 5 to 15 items NURand(8191, 1, 100000), each supplied by the
//! home warehouse with probability 0.99 (a remote one otherwise), quantity 1 to 10; 1% of the
//! transactions carry an unused item number last and roll back. Read the warehouse tax, read and
//! advance the district's next order number, read the customer, insert ORDER and NEW-ORDER, then
//! per item read ITEM, read and update STOCK, insert ORDER-LINE; commit.
//!
//! **Payment** (TPC-C §2.5): home warehouse, district uniform, the customer of the home district
//! with probability 0.85 (else of a random district of a remote warehouse), amount 1.00 to
//! 5,000.00: add it to W_YTD and D_YTD, update the customer's balance, year-to-date payment and
//! payment count, insert HISTORY; commit.
//!
//! **Consistency** (TPC-C §3.3.2), after every run: (1) W_YTD = sum of D_YTD per warehouse;
//! (2) D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) per district; (3) max(NO_O_ID) - min(NO_O_ID)
//! + 1 = the NEW-ORDER rows per district; (4) sum of O_OL_CNT = the ORDER-LINE rows per district.

use std::time::Instant;

use kvssd_flash::SimTime;
use kvssd_host::sim::{self, Program, Step, Workload};
use kvssd_host::{CommitPath, Host, HostError, TableId};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::oltp::{self, OltpConfig, OltpReport, OltpResult};
use crate::tpcb::{cache_bytes_for, key_of};

/// Bytes of every value but CUSTOMER's (KAML §V-D).
pub const VALUE_BYTES: usize = 512;
/// Bytes of a CUSTOMER value (KAML §V-D).
pub const CUSTOMER_BYTES: usize = 1024;
/// Districts per warehouse (TPC-C §1.3).
pub const DISTRICTS: u64 = 10;
/// Customers per district (TPC-C §1.3).
pub const CUSTOMERS: u64 = 3_000;
/// Items, and stock rows per warehouse (TPC-C §1.3).
pub const ITEMS: u64 = 100_000;

/// Which transaction a run drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transaction {
    /// NewOrder (§2.4).
    NewOrder,
    /// Payment (§2.5).
    Payment,
}

impl Transaction {
    /// Its name in results.
    pub fn name(self) -> &'static str {
        match self {
            Transaction::NewOrder => "NewOrder",
            Transaction::Payment => "Payment",
        }
    }
}

/// `kvssd bench tpcc`'s configuration.
#[derive(Debug, Clone)]
pub struct TpccConfig {
    /// The run grid and device.
    pub oltp: OltpConfig,
    /// Warehouses.
    pub scale: u32,
    /// Transactions to run, each alone.
    pub transactions: Vec<Transaction>,
}

impl TpccConfig {
    /// Defaults: scale 10 (the comparison point), NewOrder and Payment, the OLTP defaults.
    pub fn default_config() -> TpccConfig {
        TpccConfig {
            oltp: OltpConfig::default_config(),
            scale: 10,
            transactions: vec![Transaction::NewOrder, Transaction::Payment],
        }
    }
}

fn field(value: Option<&Vec<u8>>, offset: usize) -> i64 {
    value
        .and_then(|value| value.get(offset..offset + 8))
        .map_or(0, |bytes| {
            let mut array = [0u8; 8];
            array.copy_from_slice(bytes);
            i64::from_le_bytes(array)
        })
}

fn set(value: &mut [u8], offset: usize, number: i64) {
    value[offset..offset + 8].copy_from_slice(&number.to_le_bytes());
}

fn row(bytes: usize, fields: &[i64]) -> Vec<u8> {
    let mut value = vec![b'x'; bytes];
    for (index, &number) in fields.iter().enumerate() {
        set(&mut value, index * 8, number);
    }
    value
}

// Field offsets.
const W_YTD: usize = 0;
const D_YTD: usize = 0;
const D_NEXT_O_ID: usize = 16;
const C_BALANCE: usize = 0;
const C_YTD_PAYMENT: usize = 8;
const C_PAYMENT_CNT: usize = 16;
const O_OL_CNT: usize = 16;
const S_QUANTITY: usize = 0;
const S_YTD: usize = 8;
const S_ORDER_CNT: usize = 16;
const S_REMOTE_CNT: usize = 24;
const I_PRICE: usize = 0;

/// The tables.
#[derive(Debug, Clone, Copy)]
struct Tables {
    warehouse: TableId,
    district: TableId,
    customer: TableId,
    item: TableId,
    stock: TableId,
    order: TableId,
    new_order: TableId,
    order_line: TableId,
    history: TableId,
}

// Record numbers of the primary keys (warehouses and districts from 0).
fn district_no(w: u64, d: u64) -> u64 {
    w * DISTRICTS + d
}
fn customer_no(w: u64, d: u64, c: u64) -> u64 {
    district_no(w, d) * CUSTOMERS + c
}
fn stock_no(w: u64, i: u64) -> u64 {
    w * ITEMS + i
}
fn order_no(w: u64, d: u64, o: u64) -> u64 {
    (district_no(w, d) << 32) | o
}
fn order_line_no(w: u64, d: u64, o: u64, line: u64) -> u64 {
    (district_no(w, d) << 36) | (o << 4) | line
}

/// NURand(A, x, y) (TPC-C §2.1.6) with C = 0 (a run-time constant the spec lets us choose).
fn nurand(rng: &mut Xoshiro256PlusPlus, a: u64, x: u64, y: u64) -> u64 {
    let r1 = rng.next_u64() % (a + 1);
    let r2 = x + rng.next_u64() % (y - x + 1);
    ((r1 | r2) % (y - x + 1)) + x
}

struct NewOrder {
    tables: Tables,
    w: u64,
    d: u64,
    c: u64,
    /// (item, supplying warehouse, quantity); item 0 is the unused number of a rollback.
    lines: Vec<(u64, u64, u64)>,
}

impl Program for NewOrder {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        let t = self.tables;
        let (w, d) = (self.w, self.d);
        let o = field(results.get(1).and_then(Option::as_ref), D_NEXT_O_ID) as u64;
        match results.len() {
            0 => Step::Read(t.warehouse, key_of(w)),
            1 => Step::ReadForUpdate(t.district, key_of(district_no(w, d))),
            2 => {
                let mut district = results[1].clone().unwrap_or_else(|| row(VALUE_BYTES, &[]));
                set(&mut district, D_NEXT_O_ID, o as i64 + 1);
                Step::Update(t.district, key_of(district_no(w, d)), district)
            }
            3 => Step::Read(t.customer, key_of(customer_no(w, d, self.c))),
            4 => {
                let all_local = self.lines.iter().all(|line| line.1 == w);
                Step::Insert(
                    t.order,
                    key_of(order_no(w, d, o)),
                    row(
                        VALUE_BYTES,
                        &[
                            self.c as i64,
                            0,
                            self.lines.len() as i64,
                            i64::from(all_local),
                        ],
                    ),
                )
            }
            5 => Step::Insert(
                t.new_order,
                key_of(order_no(w, d, o)),
                row(VALUE_BYTES, &[o as i64]),
            ),
            index => {
                // Four steps per line: read ITEM, read STOCK, update STOCK, insert ORDER-LINE.
                let line = (index - 6) / 4;
                let Some(&(item, supply, quantity)) = self.lines.get(line) else {
                    return Step::Commit;
                };
                let stock_key = key_of(stock_no(supply, item));
                match (index - 6) % 4 {
                    0 => Step::Read(t.item, key_of(item)),
                    1 => {
                        if results[index - 1].is_none() {
                            // The unused item number: roll back (TPC-C §2.4.2.3).
                            return Step::Abort;
                        }
                        Step::ReadForUpdate(t.stock, stock_key)
                    }
                    2 => {
                        let mut stock = results[index - 1]
                            .clone()
                            .unwrap_or_else(|| row(VALUE_BYTES, &[]));
                        let have = field(Some(&stock), S_QUANTITY);
                        let q = quantity as i64;
                        let left = if have >= q + 10 {
                            have - q
                        } else {
                            have - q + 91
                        };
                        set(&mut stock, S_QUANTITY, left);
                        let ytd = field(Some(&stock), S_YTD) + q;
                        set(&mut stock, S_YTD, ytd);
                        let orders = field(Some(&stock), S_ORDER_CNT) + 1;
                        set(&mut stock, S_ORDER_CNT, orders);
                        if supply != w {
                            let remote = field(Some(&stock), S_REMOTE_CNT) + 1;
                            set(&mut stock, S_REMOTE_CNT, remote);
                        }
                        Step::Update(t.stock, stock_key, stock)
                    }
                    _ => {
                        let price = field(results[index - 3].as_ref(), I_PRICE);
                        Step::Insert(
                            t.order_line,
                            key_of(order_line_no(w, d, o, line as u64 + 1)),
                            row(
                                VALUE_BYTES,
                                &[
                                    item as i64,
                                    supply as i64,
                                    quantity as i64,
                                    price * quantity as i64,
                                ],
                            ),
                        )
                    }
                }
            }
        }
    }
}

struct Payment {
    tables: Tables,
    w: u64,
    d: u64,
    /// The customer's warehouse, district and number.
    customer: (u64, u64, u64),
    amount: i64,
    history: u64,
}

impl Program for Payment {
    fn step(&mut self, results: &[Option<Vec<u8>>]) -> Step {
        let t = self.tables;
        let (cw, cd, c) = self.customer;
        let bump = |index: usize, fields: &[(usize, i64)], bytes: usize| {
            let mut value = results[index].clone().unwrap_or_else(|| row(bytes, &[]));
            for &(offset, delta) in fields {
                let old = field(Some(&value), offset);
                set(&mut value, offset, old + delta);
            }
            value
        };
        match results.len() {
            0 => Step::ReadForUpdate(t.warehouse, key_of(self.w)),
            1 => Step::Update(
                t.warehouse,
                key_of(self.w),
                bump(0, &[(W_YTD, self.amount)], VALUE_BYTES),
            ),
            2 => Step::ReadForUpdate(t.district, key_of(district_no(self.w, self.d))),
            3 => Step::Update(
                t.district,
                key_of(district_no(self.w, self.d)),
                bump(2, &[(D_YTD, self.amount)], VALUE_BYTES),
            ),
            4 => Step::ReadForUpdate(t.customer, key_of(customer_no(cw, cd, c))),
            5 => Step::Update(
                t.customer,
                key_of(customer_no(cw, cd, c)),
                bump(
                    4,
                    &[
                        (C_BALANCE, -self.amount),
                        (C_YTD_PAYMENT, self.amount),
                        (C_PAYMENT_CNT, 1),
                    ],
                    CUSTOMER_BYTES,
                ),
            ),
            6 => Step::Insert(
                t.history,
                key_of(self.history),
                row(
                    VALUE_BYTES,
                    &[
                        self.amount,
                        c as i64,
                        cd as i64,
                        cw as i64,
                        self.d as i64,
                        self.w as i64,
                    ],
                ),
            ),
            _ => Step::Commit,
        }
    }
}

struct Generator {
    rng: Xoshiro256PlusPlus,
    tables: Tables,
    warehouses: u64,
    transaction: Transaction,
    issued: Vec<u64>,
}

impl Generator {
    fn other_warehouse(&mut self, home: u64) -> u64 {
        if self.warehouses == 1 {
            return home;
        }
        let other = self.rng.next_u64() % (self.warehouses - 1);
        if other >= home {
            other + 1
        } else {
            other
        }
    }
}

impl Workload for Generator {
    fn next(&mut self, client: u32) -> Box<dyn Program> {
        // Each client is a terminal of one home warehouse (TPC-C §2.4.1.1, §2.5.1.1).
        let w = u64::from(client) % self.warehouses;
        let d = self.rng.next_u64() % DISTRICTS;
        match self.transaction {
            Transaction::NewOrder => {
                let c = nurand(&mut self.rng, 1023, 1, CUSTOMERS) - 1;
                let count = 5 + self.rng.next_u64() % 11;
                let rollback = self.rng.next_u64() % 100 == 0;
                let mut lines: Vec<(u64, u64, u64)> = (0..count)
                    .map(|_| {
                        let item = nurand(&mut self.rng, 8191, 1, ITEMS);
                        let supply = if self.rng.next_u64() % 100 == 0 {
                            self.other_warehouse(w)
                        } else {
                            w
                        };
                        (item, supply, 1 + self.rng.next_u64() % 10)
                    })
                    .collect();
                if rollback {
                    if let Some(last) = lines.last_mut() {
                        last.0 = 0;
                    }
                }
                Box::new(NewOrder {
                    tables: self.tables,
                    w,
                    d,
                    c,
                    lines,
                })
            }
            Transaction::Payment => {
                let customer = if self.warehouses == 1 || self.rng.next_u64() % 100 < 85 {
                    (w, d, nurand(&mut self.rng, 1023, 1, CUSTOMERS) - 1)
                } else {
                    let cw = self.other_warehouse(w);
                    let cd = self.rng.next_u64() % DISTRICTS;
                    (cw, cd, nurand(&mut self.rng, 1023, 1, CUSTOMERS) - 1)
                };
                let amount = 100 + (self.rng.next_u64() % 499_901) as i64;
                let sequence = &mut self.issued[client as usize];
                let history = (u64::from(client) << 40) | *sequence;
                *sequence += 1;
                Box::new(Payment {
                    tables: self.tables,
                    w,
                    d,
                    customer,
                    amount,
                    history,
                })
            }
        }
    }
}

pub use crate::oltp::Progress;

/// Runs the grid: every transaction × commit path × lock granularity × hit ratio.
pub fn run(config: &TpccConfig, progress: Progress<'_>) -> Result<OltpReport, String> {
    let mut results = Vec::new();
    for &transaction in &config.transactions {
        for &path in &config.oltp.commit_paths {
            for &granularity in &config.oltp.lock_granularities {
                for &hit_ratio in &config.oltp.hit_ratios {
                    let result =
                        run_one(config, transaction, path, granularity, hit_ratio, progress)?;
                    progress(&format!(
                        "tpcc {} {} granularity {granularity} hit {hit_ratio}: {:.0} tps \
                         (simulated), consistency {}",
                        transaction.name(),
                        path.name(),
                        result.throughput_tps,
                        if result.invariants_hold {
                            "holds"
                        } else {
                            "VIOLATED"
                        }
                    ));
                    results.push(result);
                }
            }
        }
    }
    Ok(OltpReport {
        benchmark: "tpcc".into(),
        simulated: true,
        seed: config.oltp.seed,
        setup: format!(
            "TPC-C NewOrder and Payment each alone, scale {} warehouses, {}-byte values ({} for \
             CUSTOMER), {} clients (terminals spread over the warehouses), {} committed \
             transactions per run, {} ns host CPU per step",
            config.scale,
            VALUE_BYTES,
            CUSTOMER_BYTES,
            config.oltp.clients,
            config.oltp.transactions,
            config.oltp.step_ns
        ),
        results,
    })
}

fn run_one(
    config: &TpccConfig,
    transaction: Transaction,
    path: CommitPath,
    granularity: u64,
    hit_ratio: f64,
    progress: Progress<'_>,
) -> Result<OltpResult, String> {
    let wall = Instant::now();
    let warehouses = u64::from(config.scale.max(1));
    let customers = warehouses * DISTRICTS * CUSTOMERS;
    let stock = warehouses * ITEMS;
    let small_records = warehouses + warehouses * DISTRICTS + ITEMS + stock;
    // The cache's share is of the loaded records' footprint (CUSTOMER's values are twice the
    // others').
    let cache_bytes = if hit_ratio >= 1.0 {
        u64::MAX / 4
    } else {
        cache_bytes_for(hit_ratio, small_records, VALUE_BYTES)
            + cache_bytes_for(hit_ratio, customers, CUSTOMER_BYTES)
    };
    let grown = config.oltp.transactions * 20;
    let mut host = oltp::open_host(
        &config.oltp,
        path,
        granularity,
        cache_bytes,
        (small_records + customers).max(grown),
        CUSTOMER_BYTES,
    )?;
    let e = |error: HostError| error.to_string();
    let tables = Tables {
        warehouse: host.create_table("warehouse", VALUE_BYTES).map_err(e)?,
        district: host.create_table("district", VALUE_BYTES).map_err(e)?,
        customer: host.create_table("customer", CUSTOMER_BYTES).map_err(e)?,
        item: host.create_table("item", VALUE_BYTES).map_err(e)?,
        stock: host.create_table("stock", VALUE_BYTES).map_err(e)?,
        order: host.create_table("order", VALUE_BYTES).map_err(e)?,
        new_order: host.create_table("new_order", VALUE_BYTES).map_err(e)?,
        order_line: host.create_table("order_line", VALUE_BYTES).map_err(e)?,
        history: host.create_table("history", VALUE_BYTES).map_err(e)?,
    };
    let mut t: SimTime = 0;
    let mut chunk = Vec::with_capacity(4096);
    let mut seed = Xoshiro256PlusPlus::seed_from_u64(config.oltp.seed ^ 0x7c);
    let flush = |host: &mut Host, chunk: &mut Vec<(TableId, Vec<u8>, Vec<u8>)>, t: &mut SimTime| {
        if !chunk.is_empty() {
            *t = host.load(*t, chunk).map_err(e)?;
            chunk.clear();
        }
        Ok::<(), String>(())
    };
    // Stock and customers first, the small hot tables last, so those start cached.
    for w in 0..warehouses {
        for i in 1..=ITEMS {
            let quantity = 10 + (seed.next_u64() % 91) as i64;
            chunk.push((
                tables.stock,
                key_of(stock_no(w, i)),
                row(VALUE_BYTES, &[quantity]),
            ));
            if chunk.len() == 4096 {
                flush(&mut host, &mut chunk, &mut t)?;
            }
        }
        for d in 0..DISTRICTS {
            for c in 0..CUSTOMERS {
                let mut value = row(CUSTOMER_BYTES, &[-1_000, 1_000, 1, 0]);
                value[32] = if seed.next_u64() % 10 == 0 {
                    b'B'
                } else {
                    b'G'
                };
                chunk.push((tables.customer, key_of(customer_no(w, d, c)), value));
                if chunk.len() == 4096 {
                    flush(&mut host, &mut chunk, &mut t)?;
                }
            }
        }
    }
    for i in 1..=ITEMS {
        let price = 100 + (seed.next_u64() % 9_901) as i64;
        chunk.push((tables.item, key_of(i), row(VALUE_BYTES, &[price])));
        if chunk.len() == 4096 {
            flush(&mut host, &mut chunk, &mut t)?;
        }
    }
    for w in 0..warehouses {
        let tax = (seed.next_u64() % 2_001) as i64;
        chunk.push((
            tables.warehouse,
            key_of(w),
            row(VALUE_BYTES, &[30_000_000, tax]),
        ));
        for d in 0..DISTRICTS {
            let tax = (seed.next_u64() % 2_001) as i64;
            chunk.push((
                tables.district,
                key_of(district_no(w, d)),
                row(VALUE_BYTES, &[3_000_000, tax, 1]),
            ));
        }
    }
    flush(&mut host, &mut chunk, &mut t)?;
    let start = t.max(host.device().quiescent_at().map_err(|e| e.to_string())?);
    progress(&format!(
        "tpcc {} {} granularity {granularity} hit {hit_ratio}: loaded ({:.1} s)",
        transaction.name(),
        path.name(),
        wall.elapsed().as_secs_f64()
    ));
    let mut generator = Generator {
        rng: Xoshiro256PlusPlus::seed_from_u64(config.oltp.seed),
        tables,
        warehouses,
        transaction,
        issued: vec![0; config.oltp.clients.max(1) as usize],
    };
    let (outcome, before, after) = config.oltp.simulate(&mut host, &mut generator, start)?;
    let run_wall = wall.elapsed().as_secs_f64();
    let (invariants_hold, invariants) = check(&mut host, warehouses, tables, &outcome)?;
    Ok(OltpResult::from_run(
        transaction.name().into(),
        config
            .oltp
            .params(path, granularity, hit_ratio, config.scale),
        &outcome,
        (&before, &after),
        (invariants_hold, invariants),
        run_wall,
    ))
}

/// TPC-C's consistency conditions 1-4 (§3.3.2) over every warehouse and district.
fn check(
    host: &mut Host,
    warehouses: u64,
    tables: Tables,
    outcome: &sim::SimOutcome,
) -> Result<(bool, String), String> {
    let e = |error: HostError| error.to_string();
    let mut t = outcome
        .finished_at
        .max(host.device().quiescent_at().map_err(|e| e.to_string())?);
    let mut read = |host: &mut Host, table: TableId, number: u64| {
        let (value, done) = host.read_committed(t, table, &key_of(number)).map_err(e)?;
        t = done;
        Ok::<Option<Vec<u8>>, String>(value)
    };
    let mut violations = Vec::new();
    let mut orders_total = 0u64;
    let mut lines_total = 0u64;
    for w in 0..warehouses {
        let w_ytd = field(read(host, tables.warehouse, w)?.as_ref(), W_YTD);
        let mut d_ytd = 0;
        for d in 0..DISTRICTS {
            let district = read(host, tables.district, district_no(w, d))?;
            d_ytd += field(district.as_ref(), D_YTD);
            let next = field(district.as_ref(), D_NEXT_O_ID) as u64;
            let (mut max_o, mut max_no, mut min_no, mut new_orders) = (0, 0, u64::MAX, 0u64);
            let (mut ol_cnt, mut lines) = (0i64, 0i64);
            // Order numbers run from 1 to D_NEXT_O_ID - 1; look one past to catch strays.
            for o in 1..=next {
                if let Some(order) = read(host, tables.order, order_no(w, d, o))? {
                    max_o = o;
                    let count = field(Some(&order), O_OL_CNT);
                    ol_cnt += count;
                    for line in 1..=15 {
                        if read(host, tables.order_line, order_line_no(w, d, o, line))?.is_some() {
                            lines += 1;
                        }
                    }
                }
                if read(host, tables.new_order, order_no(w, d, o))?.is_some() {
                    new_orders += 1;
                    max_no = o;
                    min_no = min_no.min(o);
                }
            }
            orders_total += max_o;
            lines_total += lines as u64;
            if next - 1 != max_o || max_o != max_no {
                violations.push(format!(
                    "(2) w {w} d {d}: D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {max_no}",
                    next - 1
                ));
            }
            let span = if new_orders == 0 {
                0
            } else {
                max_no - min_no + 1
            };
            if span != new_orders {
                violations.push(format!(
                    "(3) w {w} d {d}: NEW-ORDER span {span} but {new_orders} rows"
                ));
            }
            if ol_cnt != lines {
                violations.push(format!(
                    "(4) w {w} d {d}: sum(O_OL_CNT) {ol_cnt} but {lines} ORDER-LINE rows"
                ));
            }
        }
        if w_ytd != d_ytd {
            violations.push(format!("(1) w {w}: W_YTD {w_ytd} but sum(D_YTD) {d_ytd}"));
        }
    }
    let hold = violations.is_empty();
    let summary =
        format!(
        "conditions 1-4 over {warehouses} warehouses: {} ({orders_total} orders, {lines_total} \
         order lines)",
        if hold {
            "hold".to_string()
        } else {
            violations.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        }
    );
    Ok((hold, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpcc_small_run_keeps_conditions_one_to_four_on_both_paths() {
        let mut config = TpccConfig::default_config();
        config.scale = 1;
        // Smaller cards leave too few blocks for 64 logs' open blocks beside the data.
        config.oltp.flash = kvssd_flash::Profile::pink_with_blocks(8);
        config.oltp.transactions = 60;
        config.oltp.clients = 4;
        config.oltp.hit_ratios = vec![1.0];
        config.oltp.lock_granularities = vec![16];
        let report = run(&config, &mut |_| {}).expect("run");
        assert_eq!(report.results.len(), 4);
        for result in &report.results {
            assert!(result.invariants_hold, "{}", result.invariants);
            assert!(result.committed > 0);
        }
        let new_order = &report.results[0];
        assert!(new_order.invariants.contains("orders"));
        crate::oltp_report::assert_plots_written(&report);
    }
}

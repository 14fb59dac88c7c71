//! Asynchronous commands: a submission queue of bounded depth, one executor thread and one
//! completion thread per device.
//!
//! A `*_async` call checks its arguments in the caller's thread (so a bad argument is returned at
//! once, as OpenMPDK does), then queues the command and returns. The executor runs commands in
//! submission order on the device; the completion thread calls each command's callback once it is
//! complete (on a paced device: once the wall clock has reached its simulated completion; several
//! commands are in flight at once, so they overlap on the simulated card). At most `depth`
//! commands are between submission and the start of their callback: a submission beyond that
//! waits for a slot, except one made from inside a callback, which never waits (waiting there
//! would stop the very thread that frees slots).

use std::cell::Cell;
use std::collections::BinaryHeap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::clock::{tighten_timer_slack, wait_until, Latencies, Timing, SPIN_BELOW};
use crate::ffi::{
    KvsPostprocessContext, KvsPostprocessFunction, KvsResult, KvsResultBuffer, KVS_ERR_SYS_IO,
};

thread_local! {
    /// Set on completion threads, so a callback's own submissions never wait for a slot.
    static IN_COMPLETION: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is a completion thread (inside a callback).
pub fn in_completion_thread() -> bool {
    IN_COMPLETION.with(Cell::get)
}

/// What a callback is called with, besides the result: the caller's pointers, carried as
/// addresses because they cross threads (the API requires them to stay valid until the callback).
#[derive(Debug, Clone, Copy)]
pub struct Notice {
    /// `kvs_context`.
    pub context: u32,
    /// The key space handle.
    pub ks_hd: usize,
    /// `kvs_key*` (for exist: the key array).
    pub key: usize,
    /// `kvs_value*`.
    pub value: usize,
    /// The option pointer.
    pub option: usize,
    /// The caller's pointers.
    pub private1: usize,
    /// The caller's pointers.
    pub private2: usize,
    /// The iterator handle.
    pub iter_hd: u8,
    /// `kvs_exist_list*` or `kvs_iterator_list*`.
    pub result_buffer: usize,
    /// The callback.
    pub post_fn: unsafe extern "C" fn(*mut KvsPostprocessContext),
}

impl Notice {
    /// A notice for a command of `context` on key space `ks_hd` with the caller's pointers; the
    /// command's own pointers (key, value, option, result buffer) are 0 until set.
    pub fn new(
        context: u32,
        ks_hd: *mut std::ffi::c_void,
        private1: *mut std::ffi::c_void,
        private2: *mut std::ffi::c_void,
        post_fn: unsafe extern "C" fn(*mut KvsPostprocessContext),
    ) -> Notice {
        Notice {
            context,
            ks_hd: ks_hd as usize,
            key: 0,
            value: 0,
            option: 0,
            private1: private1 as usize,
            private2: private2 as usize,
            iter_hd: 0,
            result_buffer: 0,
            post_fn,
        }
    }
}

/// What a command's execution yields: its result and timing.
pub type Executed = (KvsResult, Timing);

/// A queued command.
pub struct Job {
    /// Runs the command on the device.
    pub run: Box<dyn FnOnce() -> Executed + Send>,
    /// Whom to tell.
    pub notice: Notice,
    /// When it was submitted.
    pub submitted: Instant,
}

struct Completion {
    notice: Notice,
    result: KvsResult,
    timing: Timing,
    /// Breaks ties between equal deadlines in submission order.
    sequence: u64,
}

impl Completion {
    fn due(&self) -> Instant {
        self.timing.deadline.unwrap_or(self.timing.submitted)
    }
}

impl PartialEq for Completion {
    fn eq(&self, other: &Self) -> bool {
        self.sequence == other.sequence
    }
}

impl Eq for Completion {}

impl PartialOrd for Completion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Completion {
    // A max-heap that pops the earliest due, then the earliest submitted.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due(), other.sequence).cmp(&(self.due(), self.sequence))
    }
}

struct Slots {
    in_flight: usize,
    closed: bool,
}

/// One device's asynchronous machinery.
pub struct AsyncQueue {
    depth: usize,
    slots: Arc<(Mutex<Slots>, Condvar)>,
    jobs: Mutex<Option<Sender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl AsyncQueue {
    /// Starts the executor and completion threads.
    pub fn start(depth: usize, latencies: Arc<Latencies>) -> std::io::Result<AsyncQueue> {
        let slots = Arc::new((
            Mutex::new(Slots {
                in_flight: 0,
                closed: false,
            }),
            Condvar::new(),
        ));
        let (job_sender, job_receiver) = mpsc::channel::<Job>();
        let (done_sender, done_receiver) = mpsc::channel::<Completion>();
        let executor = std::thread::Builder::new()
            .name("kvssd-submit".into())
            .spawn(move || execute(job_receiver, done_sender))?;
        let completion_slots = Arc::clone(&slots);
        let completer = std::thread::Builder::new()
            .name("kvssd-complete".into())
            .spawn(move || complete(done_receiver, completion_slots, latencies))?;
        Ok(AsyncQueue {
            depth,
            slots,
            jobs: Mutex::new(Some(job_sender)),
            threads: Mutex::new(vec![executor, completer]),
        })
    }

    /// The queue depth.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Queues a command, waiting for a slot unless called from a callback. Fails once the device
    /// is closing.
    pub fn enqueue(&self, job: Job) -> Result<(), KvsResult> {
        let (lock, freed) = &*self.slots;
        let mut slots = lock.lock().map_err(|_| KVS_ERR_SYS_IO)?;
        if !in_completion_thread() {
            while slots.in_flight >= self.depth && !slots.closed {
                slots = freed.wait(slots).map_err(|_| KVS_ERR_SYS_IO)?;
            }
        }
        if slots.closed {
            return Err(crate::ffi::KVS_ERR_DEV_NOT_EXIST);
        }
        let jobs = self.jobs.lock().map_err(|_| KVS_ERR_SYS_IO)?;
        let Some(sender) = jobs.as_ref() else {
            return Err(crate::ffi::KVS_ERR_DEV_NOT_EXIST);
        };
        sender.send(job).map_err(|_| KVS_ERR_SYS_IO)?;
        slots.in_flight += 1;
        Ok(())
    }

    /// Refuses new commands, waits for every queued one's callback, and stops the threads.
    /// Called from a callback it cannot wait for itself: it refuses with `KVS_ERR_SYS_IO`.
    pub fn shut_down(&self) -> Result<(), KvsResult> {
        if in_completion_thread() {
            return Err(KVS_ERR_SYS_IO);
        }
        let (lock, freed) = &*self.slots;
        {
            let mut slots = lock.lock().map_err(|_| KVS_ERR_SYS_IO)?;
            slots.closed = true;
            freed.notify_all();
            while slots.in_flight > 0 {
                slots = freed.wait(slots).map_err(|_| KVS_ERR_SYS_IO)?;
            }
        }
        // Dropping the sender ends the executor, whose end ends the completion thread.
        drop(self.jobs.lock().map_err(|_| KVS_ERR_SYS_IO)?.take());
        let threads = std::mem::take(&mut *self.threads.lock().map_err(|_| KVS_ERR_SYS_IO)?);
        for thread in threads {
            thread.join().map_err(|_| KVS_ERR_SYS_IO)?;
        }
        Ok(())
    }
}

fn execute(jobs: Receiver<Job>, done: Sender<Completion>) {
    for (sequence, job) in jobs.into_iter().enumerate() {
        let sequence = sequence as u64;
        let submitted = job.submitted;
        // A panic in a command must still complete it (else its slot is never freed); the
        // command then reports an I/O error.
        let (result, timing) = catch_unwind(AssertUnwindSafe(job.run)).unwrap_or((
            KVS_ERR_SYS_IO,
            Timing {
                submitted,
                issued_at: 0,
                done_at: 0,
                deadline: None,
            },
        ));
        let completion = Completion {
            notice: job.notice,
            result,
            timing,
            sequence,
        };
        if done.send(completion).is_err() {
            return;
        }
    }
}

fn complete(
    arrivals: Receiver<Completion>,
    slots: Arc<(Mutex<Slots>, Condvar)>,
    latencies: Arc<Latencies>,
) {
    IN_COMPLETION.with(|flag| flag.set(true));
    tighten_timer_slack();
    let mut pending: BinaryHeap<Completion> = BinaryHeap::new();
    let mut open = true;
    while open || !pending.is_empty() {
        // Wait for the next arrival, or until the earliest pending completion is nearly due.
        let now = Instant::now();
        let wait = pending
            .peek()
            .map(|next| next.due().saturating_duration_since(now));
        let arrival = match wait {
            _ if !open => {
                if let Some(next) = pending.peek() {
                    wait_until(next.due(), SPIN_BELOW);
                }
                None
            }
            None => match arrivals.recv() {
                Ok(completion) => Some(completion),
                Err(_) => {
                    open = false;
                    None
                }
            },
            Some(wait) if wait > SPIN_BELOW => match arrivals.recv_timeout(wait - SPIN_BELOW) {
                Ok(completion) => Some(completion),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => {
                    open = false;
                    None
                }
            },
            Some(_) => arrivals.try_recv().ok(),
        };
        if let Some(completion) = arrival {
            pending.push(completion);
        }
        while let Some(next) = pending.peek() {
            let due = next.due();
            let now = Instant::now();
            if due > now {
                if due - now <= SPIN_BELOW {
                    std::hint::spin_loop();
                }
                break;
            }
            if let Some(completion) = pending.pop() {
                deliver(completion, &slots, &latencies);
            }
        }
    }
}

fn deliver(completion: Completion, slots: &(Mutex<Slots>, Condvar), latencies: &Latencies) {
    completion.timing.record_completion(latencies);
    // The slot is freed before the callback runs, so a callback may submit the next command.
    {
        let (lock, freed) = slots;
        if let Ok(mut slots) = lock.lock() {
            slots.in_flight = slots.in_flight.saturating_sub(1);
        }
        freed.notify_all();
    }
    let notice = completion.notice;
    let mut context = KvsPostprocessContext {
        context: notice.context,
        ks_hd: notice.ks_hd as *mut _,
        key: notice.key as *mut _,
        value: notice.value as *mut _,
        option: notice.option as *mut _,
        private1: notice.private1 as *mut _,
        private2: notice.private2 as *mut _,
        result: completion.result,
        iter_hd: notice.iter_hd,
        result_buffer: KvsResultBuffer {
            list: notice.result_buffer as *mut _,
        },
    };
    let post_fn: KvsPostprocessFunction = Some(notice.post_fn);
    if let Some(post_fn) = post_fn {
        // SAFETY: `post_fn` is the non-NULL callback the caller gave with this command; it gets a
        // pointer to a context that lives until it returns, holding the pointers the caller gave.
        unsafe { post_fn(&mut context) };
    }
}

/// Queues a command on a key space's device; the result is what the submission itself returns.
pub fn submit(
    key_space: &crate::state::KeySpace,
    run: impl FnOnce() -> Executed + Send + 'static,
    notice: Notice,
    submitted: Instant,
) -> KvsResult {
    let job = Job {
        run: Box::new(run),
        notice,
        submitted,
    };
    match key_space.device.queue.enqueue(job) {
        Ok(()) => crate::ffi::KVS_SUCCESS,
        Err(code) => code,
    }
}

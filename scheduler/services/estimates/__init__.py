"""Why a job waits, where it stands, and when it should start: the database side.

Reads a queue's live snapshot (through `fleet.bridge`, the one bridge to the
engine) and the work figures of its live jobs, and hands them to the engine
(`engine.explain`, `engine.eta`): positions and blockers come
from the same Board the live pass uses, estimates from a forward simulation of the
snapshot with each job's declared duration corrected by history (how long finished
jobs of the same definition, else the same share, else the queue, really ran against
what they declared; `HISTORY_DAYS` of single-run jobs). The forecast's range is then
calibrated by the queue's record of its past estimates against the actual starts
(`calibration`, `record`; issue 26): each estimate is a p10–p90 range with its median.

The queue's clock: a simulated queue runs `speed` compute seconds per real second, so
the forecast works in compute seconds (epoch seconds x speed) and every instant is
turned back into a real one for display; waits are given in the queue's clock too.

What is computed for a queue (its explanations, both forecasts and what "if you submit
this now" reads of them) is stored in the shared cache (Redis when REDIS_URL is set)
with the queue's fingerprint (`forecast.queue_fingerprint`: its last job event, its live
jobs' figures, its policy) and its instant, and each process keeps the last one it read.
A read serves it when it is current (same fingerprint, at most `ESTIMATE_CACHE_SECONDS`
old); otherwise it serves it all the same, marked not current (pages say "as of", the
API gives `estimated_at` and `current`), and asks for a new one: the Celery task
`scheduler.estimate_queue` on the interactive queue, also asked after every pass
(`request_estimates`: coalesced, at most one waiting per queue; it recomputes only when
the queue changed). Only the first forecast of a queue, a small queue's
(`ESTIMATE_SYNC_MAX_LIVE` live jobs, 300: some 40 ms on PostgreSQL, less than asking)
and one asked for a given `now` are computed by the read. Pages, the pending list and
the estimate endpoint all read the same forecast, so they agree. At 10,000 waiting jobs
a forecast takes over a second; serving one costs some 10 ms, 30 ms when the process
reads it from the cache first (`manage.py bench_eta`).

The modules: `clock` (the queue's clock), `forecast` (history, the live state, the
forecast and what is stored of it, the fingerprint), `calibration` (the range from the
record, pure Python: the live queue and bench_eta's replays share it), `record` (the
`EstimateRecord` rows: kept by each forecast, read for the calibration and the queue
page's coverage), `store` (the two caches, whether a
stored forecast is current, the background task's side), `wording` (the instants and
names in blocker sentences) and `reads` (what pages, the pending list and the API read:
entries, estimates, "if you submit this now").
"""

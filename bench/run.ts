/**
 * `npm run bench [-- --runs N --only docker,local --docker-user agent --no-memory --no-scale --no-flood-cancel --no-fs --fs-only --no-swarm --no-persistence --no-jobs --no-egress --against pinned|COMMIT]`
 *
 * Measures the persistent-shell steps an agent pays for, in each world, beside the upstream
 * local provider (`@deepseek-ai/dsh-subprocess-local`, node-pty) measured in the same run through
 * the same `openWorld` composition and the same (default) terminal-bash config. Prints a table
 * (and the memory and scale sections) and writes `bench/results/latest.json`. See
 * bench/README.md for what each metric means.
 *
 * This file is the driver: arguments, then each world in turn (bench/worlds.ts) through the row
 * families of bench/rows/, then the report (bench/report.ts).
 * @module bench/run
 */
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { pinnedCommit, runAgainst } from './against.ts'
import { buildRows, printFs, printMemory, printScale, printTable, printThroughputRatios, writeResults } from './report.ts'
import { EGRESS_METRICS, egressRuns } from './rows/egress.ts'
import { EMULATOR_METRICS, emulatorRuns } from './rows/emulator.ts'
import { FLOOD_CANCEL_METRICS, floodCancelRuns } from './rows/flood-cancel.ts'
import { FS_METRICS, type FsMixedRecord, fsRuns } from './rows/fs.ts'
import { type MemoryRecord, floodMemory } from './rows/memory.ts'
import { PROBE_METRICS, inspectRuns } from './rows/probe.ts'
import { PWSH_METRICS, pwshRuns } from './rows/pwsh.ts'
import { SCALE_METRICS, SCALE_TERMINALS, type ScaleRecord, scaleRuns } from './rows/scale.ts'
import { SPAWN_METRICS, spawnRuns } from './rows/spawn.ts'
import { SWARM_METRICS, swarmRuns } from './rows/swarm.ts'
import { PERSISTENCE_METRICS, persistenceRuns } from './rows/persistence.ts'
import { JOB_METRICS, jobsRuns } from './rows/jobs.ts'
import { TERMINAL_METRICS, lifecycleRun } from './rows/terminal.ts'
import { type SampleTable, sampleTable } from './timing.ts'
import { DEFAULT_COMPOSITION, DEFAULT_TUNING, IMAGE, WORLD_NAMES, type WorldEntry, type WorldName, benchWorlds, cleanupAll } from './worlds.ts'

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    only: { type: 'string' },
    'docker-user': { type: 'string' },
    'ssh-user': { type: 'string', default: 'agent' },
    out: { type: 'string' },
    // The memory section (~80 s): on unless --no-memory.
    memory: { type: 'boolean', default: true },
    // The scale family (100 idle terminals per remote world): on unless --no-scale.
    scale: { type: 'boolean', default: true },
    // The flood-cancel row (20 flooding terminals per remote world): on unless --no-flood-cancel.
    'flood-cancel': { type: 'boolean', default: true },
    // The filesystem family (ctx.fs rows and the fs section): on unless --no-fs.
    fs: { type: 'boolean', default: true },
    // Only the filesystem family (and the raw transport rows it is compared with), in each selected world.
    'fs-only': { type: 'boolean', default: false },
    // The swarm family (the docker world's engine family: a three-node swarm on this machine): on unless --no-swarm.
    swarm: { type: 'boolean', default: true },
    // The persistence family (held shells, issue 22) of the remote worlds: on unless --no-persistence.
    persistence: { type: 'boolean', default: true },
    // The jobs family (background jobs held in the world, issue 35) of the remote worlds: on unless --no-jobs.
    jobs: { type: 'boolean', default: true },
    // The egress family (issue 34: the docker and ssh worlds' proxy and forwarded port, each on a confined world of its own): on unless --no-egress.
    egress: { type: 'boolean', default: true },
    // The same run on an earlier commit too, interleaved, with each row's ratio (bench/against.ts):
    // `pinned` is bench/baseline-commit.txt's commit.
    against: { type: 'string' },
  },
  allowPositionals: false,
  allowNegative: true,
})
const RUNS = Number(args.runs)
if (!Number.isSafeInteger(RUNS) || RUNS < 1) throw new Error(`--runs must be a positive integer, got ${args.runs}`)
if (args['fs-only'] && !args.fs) throw new Error('--fs-only and --no-fs exclude each other')
const HERE = dirname(fileURLToPath(import.meta.url))
const OUT = args.out ?? join(HERE, 'results', 'latest.json')
/** The worlds whose memory section is measured (the ssh world's would repeat docker's client-side story; README). */
const MEMORY_WORLDS: readonly WorldName[] = ['docker']
/**
 * The worlds whose scale family is measured: the remote ones. Local is skipped: the family
 * measures how a transport and its control channel bear many terminals, and the local
 * provider has neither (its terminals are node-pty children of this process).
 */
const SCALE_WORLDS: readonly WorldName[] = ['docker', 'ssh']
/**
 * The worlds of the flood-cancel row: the remote ones (issue 21: what is in flight per terminal
 * on the way from the world's PTY to terminal-bash when the SIGINT lands).
 */
const FLOOD_CANCEL_WORLDS: readonly WorldName[] = ['docker', 'ssh']

const WORLDS = benchWorlds({ ...(args['docker-user'] !== undefined ? { docker: args['docker-user'] } : {}), ssh: args['ssh-user'] })

/** What one world yielded: timed samples by row, memory records, the scale record and the fs record. */
interface WorldResult {
  samples: SampleTable
  memory: MemoryRecord[]
  scale: ScaleRecord[]
  fs: FsMixedRecord[]
}

/** Which optional families to measure (the flags). */
interface Sections {
  memory: boolean
  scale: boolean
  /** The flood-cancel row (bench/rows/flood-cancel.ts). */
  floodCancel: boolean
  fs: boolean
  /** Only the fs family and the raw transport rows (no terminal, probe, spawn, scale, emulator, pwsh, memory rows). */
  fsOnly: boolean
  /** The swarm family (bench/rows/swarm.ts), with the docker world's rows. */
  swarm: boolean
  /** The persistence family (bench/rows/persistence.ts) of the remote worlds. */
  persistence: boolean
  /** The jobs family (bench/rows/jobs.ts) of the remote worlds. */
  jobs: boolean
  /** The egress family (bench/rows/egress.ts), with the docker and ssh worlds' rows, after their raw transport rows. */
  egress: boolean
}

/**
 * Measure one world: warm-up, `runs` lifecycle runs, inspect rows, spawn rows, when `scale`
 * the scale family, world-specific rows, the raw transport rows, when `egress` the remote
 * world's egress family (on a confined world of its own), when `fs` the fs family (all on the
 * default composition), then the emulator rows, the pwsh rows and, when `memory`, the
 * memory section (on compositions of their own). With `fsOnly`: the raw transport rows and the
 * fs family only.
 */
async function measureWorld(entry: WorldEntry, runs: number, sections: Sections): Promise<WorldResult> {
  const metrics = [...TERMINAL_METRICS, ...FLOOD_CANCEL_METRICS, ...PROBE_METRICS, ...SCALE_METRICS, ...SPAWN_METRICS, ...EMULATOR_METRICS, ...PWSH_METRICS, ...FS_METRICS, ...SWARM_METRICS, ...PERSISTENCE_METRICS, ...JOB_METRICS, ...EGRESS_METRICS]
  const samples = sampleTable(metrics)
  const records: MemoryRecord[] = []
  const scale: ScaleRecord[] = []
  const fs: FsMixedRecord[] = []
  const opening = performance.now()
  const started = await entry.start()
  try {
    const target = await started.compose(DEFAULT_COMPOSITION)
    try {
      if (!sections.fsOnly) {
        // Warm-up (discarded): creates the managed container / connection and the control channel,
        // and warms the JIT for every code path measured below.
        await lifecycleRun(entry.world, target, sampleTable(metrics))
        console.error(`[bench] ${entry.world}: world ready + warm-up ${Math.round(performance.now() - opening)} ms`)
        for (let run = 0; run < runs; run += 1) {
          await lifecycleRun(entry.world, target, samples)
          if ((run + 1) % 5 === 0 || run + 1 === runs) console.error(`[bench] ${entry.world}: ${run + 1}/${runs} runs`)
        }
        await inspectRuns(target, Math.max(runs, 20), samples)
        await spawnRuns(target, runs, samples)
        console.error(`[bench] ${entry.world}: spawn rows done`)
        if (sections.scale && SCALE_WORLDS.includes(entry.world)) {
          scale.push(await scaleRuns(entry.world, target, runs, samples))
          console.error(`[bench] ${entry.world}: scale rows done`)
        }
        if (sections.floodCancel && FLOOD_CANCEL_WORLDS.includes(entry.world)) {
          await floodCancelRuns(entry.world, target, runs, samples)
          console.error(`[bench] ${entry.world}: flood-cancel row done`)
        }
        if (started.extraMetrics !== undefined) for (const [metric, extra] of await started.extraMetrics(runs)) samples.set(metric, extra)
        if (sections.persistence && entry.world !== 'local') {
          await persistenceRuns(entry.world, target, runs, samples)
          console.error(`[bench] ${entry.world}: persistence rows done`)
        }
        if (sections.jobs && entry.world !== 'local') {
          await jobsRuns(target, runs, samples)
          console.error(`[bench] ${entry.world}: jobs rows done`)
        }
        if (sections.swarm && entry.world === 'docker') {
          for (const [metric, swarm] of await swarmRuns(IMAGE, DEFAULT_TUNING, runs)) samples.set(metric, swarm)
          console.error(`[bench] ${entry.world}: swarm rows done`)
        }
      }
      if (started.rawTransport !== undefined) for (const [metric, raw] of await started.rawTransport(runs)) samples.set(metric, raw)
      // After the raw transport rows: the two 100 MB egress rows are divided by the raw transport row of the same world and run.
      if (sections.egress && !sections.fsOnly && entry.world !== 'local') {
        await egressRuns(entry.world, IMAGE, runs, samples)
        console.error(`[bench] ${entry.world}: egress rows done`)
      }
      if (sections.fs) {
        fs.push(await fsRuns(entry.world, target, runs, samples))
        console.error(`[bench] ${entry.world}: fs rows done`)
      }
    } finally {
      await target.dispose()
    }
    if (!sections.fsOnly) {
      await emulatorRuns(started, runs, samples)
      console.error(`[bench] ${entry.world}: emulator rows done`)
      await pwshRuns(started, runs, samples)
      if (sections.memory && MEMORY_WORLDS.includes(entry.world)) records.push(...await floodMemory(started))
    }
  } finally {
    await started.stop()
  }
  return { samples, memory: records, scale, fs }
}

let interrupted = false
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    if (interrupted) return
    interrupted = true
    console.error(`[bench] ${signal}: cleaning up`)
    void cleanupAll().finally(() => process.exit(130))
  })
}

async function main(): Promise<void> {
  if (args.against !== undefined) {
    const own: string[] = []
    const given = process.argv.slice(2)
    for (let i = 0; i < given.length; i += 1) {
      if (given[i] === '--against' || given[i] === '--out') i += 1
      else if (!given[i]!.startsWith('--against=') && !given[i]!.startsWith('--out=')) own.push(given[i]!)
    }
    await runAgainst(args.against === 'pinned' ? pinnedCommit() : args.against, own, args.out ?? join(HERE, 'results', 'against.json'))
    return
  }
  const wanted = args.only === undefined ? undefined : args.only.split(',').map(name => name.trim()).filter(name => name.length > 0)
  for (const name of wanted ?? []) {
    if (!(WORLD_NAMES as readonly string[]).includes(name)) throw new Error(`--only: unknown world ${JSON.stringify(name)} (${WORLD_NAMES.join(', ')})`)
    if (!WORLDS.some(entry => entry.world === name)) throw new Error(`--only: world ${JSON.stringify(name)} has no entry in benchWorlds (bench/worlds.ts)`)
  }
  const entries = WORLDS.filter(entry => wanted === undefined || wanted.includes(entry.world))
  if (!entries.some(entry => entry.world === 'local')) console.error('[bench] local baseline not selected: ratio columns stay empty')
  const started = performance.now()
  const results = new Map<WorldName, SampleTable>()
  const memory: MemoryRecord[] = []
  const scale: ScaleRecord[] = []
  const fs: FsMixedRecord[] = []
  for (const entry of entries) {
    const result = await measureWorld(entry, RUNS, { memory: args.memory, scale: args.scale, floodCancel: args['flood-cancel'], fs: args.fs, fsOnly: args['fs-only'], swarm: args.swarm, persistence: args.persistence, jobs: args.jobs, egress: args.egress })
    results.set(entry.world, result.samples)
    memory.push(...result.memory)
    scale.push(...result.scale)
    fs.push(...result.fs)
  }
  const rows = buildRows(results)
  const perRow = args['fs-only'] ? 'fs family only; small fs rows: at least 20 samples' : `inspectForeground: ${Math.max(RUNS, 20)} calls`
  console.log(`\nbench: ${RUNS} runs per row (${perRow}), terminal-bash defaults ${JSON.stringify(DEFAULT_TUNING)}, node ${process.version}, ${Math.round((performance.now() - started) / 1000)} s\n`)
  printTable(rows)
  printThroughputRatios(rows)
  if (memory.length > 0) {
    console.log('\nmemory: client RSS (MB = 10^6 bytes) while terminals flood output; the slope is fitted after the warm-up\n')
    printMemory(memory)
  }
  if (scale.length > 0) {
    console.log(`\nscale: ${SCALE_TERMINALS} idle terminals open at once on one world; client RSS (MB = 10^6 bytes) after a GC, before the others opened and after 2 s idle\n`)
    printScale(scale)
  }
  if (fs.length > 0) {
    console.log('\nfs: 1000 mixed ctx.fs operations from 8 concurrent callers on shared files per run; client RSS (MB = 10^6 bytes) after a GC, before and after the measured runs\n')
    printFs(fs)
  }
  await writeResults(OUT, rows, memory, scale, fs)
  console.log(`\nwrote ${OUT}`)
}

try {
  await main()
} catch (error) {
  process.exitCode = 1
  if (!interrupted) console.error('[bench] failed:', error)
} finally {
  await cleanupAll()
}

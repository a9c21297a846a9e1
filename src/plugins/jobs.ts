/**
 * `dsh-remote-worlds/jobs`: `ctx.jobs` whose background jobs live in the world of
 * `ctx.subprocess` (src/jobs/registry.ts), mounted instead of `@deepseek-ai/dsh-jobs-local`.
 * With the runtime's persistence `'client'` a job started by DSH's `bash` tool
 * (run_in_background) runs on in the world when this client ends or dies, and a later client
 * of the same DSH session lists, reads, waits for and kills it by the same id; otherwise it is
 * the upstream process-local registry.
 * @module dsh-remote-worlds/plugins/jobs
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import { WorldJobRegistry } from '../jobs/registry.ts'

export { Config, WorldJobRegistry } from '../jobs/registry.ts'
export default WorldJobRegistry

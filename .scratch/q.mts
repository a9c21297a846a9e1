import { openWorld } from '../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../src/providers/docker/docker-runtime.ts'
const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: 'dsh-remote-worlds/target:bookworm', user: 'agent' }, workspaceRoot: '/tmp', terminal: { rows: 24, cols: 80 } })
try {
  const t = await world.open()
  for (const text of [`printf '\\033[6n'; read -rs -d R pos; echo "got \${#pos}"`, 'echo after', `printf '\\033[H\\033[2J✅ab\\033[1;3HZ'`, "printf '\\033]11;?\\007'; read -rs -d $'\\a' c; printf '%q\\n' \"$c\"", "printf '\\033[>q'; read -rs -d '\\' v; printf '%q\\n' \"$v\"", "printf '\\033[18t'; read -rs -d t v; printf '%q\\n' \"$v\"", "printf '\\033[6n'", 'echo next']) {
    const r = await t.send(text)
    console.log(JSON.stringify(text), r.waitReason, Math.round(r.ms), JSON.stringify(r.viewport.slice(-200)))
    const s = await t.screen()
    console.log(s.cursor, s.lines.slice(0, 3), s.altScreen)
  }
} finally { await world.dispose() }

import xterm from '@xterm/headless'
import u from '@xterm/addon-unicode11'
console.log(Object.keys(u))
const t = new xterm.Terminal({ allowProposedApi: true, cols: 20, rows: 3 })
t.loadAddon(new u.Unicode11Addon())
t.unicode.activeVersion = '11'
t.write('\x1b[H\x1b[2J✅ab\x1b[1;3HZ', () => console.log(JSON.stringify(t.buffer.active.getLine(0)!.translateToString(true)), t.buffer.active.cursorX))

/**
 * What the login shells' startup files name (src/sandbox/startup-names.ts): the parser over the
 * lines real installers write, the reading script run by a real local sh, and what a fence
 * keeps fixed for each name. The fence in a real world, attacked from inside, is
 * test/sandbox/ssh-fence.test.ts.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { namedPaths, startupNamedPaths, startupProtected } from '../../src/sandbox/startup-names.ts'

const HOME = '/home/u'

describe('the names in a startup file', () => {
  it('conda\'s hook: its program, the file it sources and the PATH directory it adds', () => {
    const hook = [
      '# >>> conda initialize >>>',
      `__conda_setup="$('${HOME}/miniconda3/bin/conda' 'shell.bash' 'hook' 2> /dev/null)"`,
      'if [ $? -eq 0 ]; then',
      '    eval "$__conda_setup"',
      'else',
      `    if [ -f "${HOME}/miniconda3/etc/profile.d/conda.sh" ]; then`,
      `        . "${HOME}/miniconda3/etc/profile.d/conda.sh"`,
      '    else',
      `        export PATH="${HOME}/miniconda3/bin:$PATH"`,
      '    fi',
      'fi',
    ].join('\n')
    expect(namedPaths(hook, HOME)).toEqual({ sourced: [`${HOME}/miniconda3/etc/profile.d/conda.sh`], named: [`${HOME}/miniconda3/bin/conda`, `${HOME}/miniconda3/bin`] })
  })

  it('~, $HOME and ${HOME} are HOME; a source, a command, each part of an assignment\'s value; never a test\'s operand, a comment, a cd\'s operand, a word of other variables', () => {
    const text = [
      "if [ -f '/home/u/google-cloud-sdk/path.bash.inc' ]; then . '/home/u/google-cloud-sdk/path.bash.inc'; fi",
      '. "$HOME/.cargo/env"',
      'source ~/src/env.sh   # mine',
      'export PATH=${HOME}/go/bin:~/tools:$X/bin:/usr/local/bin',
      'eval "$(~/.local/bin/mise activate bash)"',
      'cd ~/project && ls',
      '~/scripts/motd.sh',
      '[ -x /usr/bin/lesspipe ] && eval "$(SHELL=/bin/sh lesspipe)"',
      '# ~/commented/out',
      "alias ll='ls -l ~/notreally'",
      '. $ZDOTDIR/env',
    ].join('\n')
    expect(namedPaths(text, HOME)).toEqual({
      sourced: [`${HOME}/google-cloud-sdk/path.bash.inc`, `${HOME}/.cargo/env`, `${HOME}/src/env.sh`],
      named: [`${HOME}/go/bin`, `${HOME}/tools`, '/usr/local/bin', `${HOME}/.local/bin/mise`, `${HOME}/scripts/motd.sh`, '/bin/sh'],
    })
  })

  it('the forms a fresh-user trial planted through: nvm\'s \\., source --, PATH+=, ${PATH:+...}, a case arm, hook variables, prefix words, a continued line', () => {
    const text = [
      '[ -s "$HOME/nvm/nvm.sh" ] && \\. "$HOME/nvm/nvm.sh"',
      'export PATH="$HOME/cuda/bin${PATH:+:$PATH}"',
      'PATH+=":$HOME/y/bin"',
      'case $- in *i*) . ~/z/rc.sh;; esac',
      'source -- ~/s/env.sh',
      'PROMPT_COMMAND=~/p/prompt.sh',
      "PATH='/home/u/q/bin':$PATH",
      'builtin source ~/b/env.sh',
      'env FOO=1 nohup ~/n/prog',
      'export ZDOTDIR=~/dotfiles/zsh',
      "alias ll=~/a/ll",
      'export PATH=$PATH:\\',
      '  ~/c/bin',
    ].join('\n')
    expect(namedPaths(text, HOME)).toEqual({
      sourced: [`${HOME}/nvm/nvm.sh`, `${HOME}/z/rc.sh`, `${HOME}/s/env.sh`, `${HOME}/b/env.sh`],
      named: [`${HOME}/cuda/bin`, `${HOME}/y/bin`, `${HOME}/p/prompt.sh`, `${HOME}/q/bin`, `${HOME}/n/prog`, `${HOME}/dotfiles/zsh`, `${HOME}/a/ll`, `${HOME}/c/bin`],
    })
  })
})

describe('the files a for loop sources', () => {
  it('each listed path counts as sourced, a plain glob in the last component kept as a pattern for the world to expand; a glob elsewhere or of other characters is not read', () => {
    const text = [
      'for rc in ~/.bashrc.d/*; do . "$rc"; done',
      'for f in ~/one.sh "$HOME/two.sh" ~/conf.d/*.sh; do source $f; done',
      'for g in ~/a*/x.sh ~/b/[ab].sh; do . $g; done',
    ].join('\n')
    expect(namedPaths(text, HOME)).toEqual({ sourced: [`${HOME}/.bashrc.d/*`, `${HOME}/one.sh`, `${HOME}/two.sh`, `${HOME}/conf.d/*.sh`], named: [] })
  })
})

describe('what a fence keeps fixed for them', () => {
  const names = { sourced: [`${HOME}/google-cloud-sdk/path.bash.inc`, `${HOME}/.cargo/env`], named: [`${HOME}/miniconda3/bin`, `${HOME}/go/bin`, '/opt/x/bin'] }

  it('a name in a non-dot entry of HOME: that whole entry, its installation; a dot-entry\'s or one outside HOME: the name', () => {
    expect(startupProtected(names, HOME, [HOME])).toEqual([`${HOME}/google-cloud-sdk`, `${HOME}/.cargo/env`, `${HOME}/miniconda3`, `${HOME}/go`, '/opt/x/bin'])
  })

  it('an installation that is a workspace root or holds one: only the name, so that workspace is not refused for what it does not hold', () => {
    expect(startupProtected(names, HOME, [`${HOME}/go/src/app`, `${HOME}/miniconda3`])).toEqual([`${HOME}/google-cloud-sdk`, `${HOME}/.cargo/env`, `${HOME}/miniconda3/bin`, `${HOME}/go/bin`, '/opt/x/bin'])
  })
})

describe('reading them in the world (a real sh over real files)', () => {
  const home = realpathSync(mkdtempSync(join(tmpdir(), 'dsh-startup-')))
  afterAll(() => rmSync(home, { recursive: true, force: true }))

  it('reads the startup files, then the files they source (a loop\'s glob expanded by the world\'s sh); a missing one, a directory and a FIFO are left out', async () => {
    mkdirSync(join(home, 'sdk'))
    mkdirSync(join(home, '.zshrc'))
    // A FIFO would block a reader that opened it: it must not be opened at all.
    expect(spawnSync('mkfifo', [join(home, '.zshenv')]).status).toBe(0)
    writeFileSync(join(home, '.bashrc'), `. ${home}/sdk/path.inc\n. ${home}/missing.sh\n`)
    writeFileSync(join(home, '.profile'), `PATH="$HOME/bin:$PATH"\n. "$HOME/.bashrc"\n`)
    writeFileSync(join(home, 'sdk', 'path.inc'), `export PATH=${home}/sdk/bin:$PATH\n. ${home}/sdk/deeper.inc\n`)
    // Fedora's loop over ~/.bashrc.d, one of whose files holds conda's hook.
    mkdirSync(join(home, '.bashrc.d'))
    writeFileSync(join(home, '.bash_profile'), 'for rc in ~/.bashrc.d/*.sh; do . "$rc"; done\n')
    writeFileSync(join(home, '.bashrc.d', 'conda.sh'), `eval "$('${home}/miniconda3/bin/conda' 'shell.bash' 'hook')"\n`)
    const run = async (script: string): Promise<{ exitCode: number | null; stdout: string }> => {
      const ran = spawnSync('sh', ['-s'], { input: script, encoding: 'utf8', env: { PATH: '/usr/bin:/bin', HOME: home } })
      return { exitCode: ran.status, stdout: ran.stdout }
    }
    expect(await startupNamedPaths(run, home)).toEqual({
      sourced: [`${home}/sdk/path.inc`, `${home}/missing.sh`, `${home}/.bashrc`, `${home}/sdk/deeper.inc`, `${home}/.bashrc.d/conda.sh`],
      named: [`${home}/bin`, `${home}/sdk/bin`, `${home}/miniconda3/bin/conda`],
    })
  })
})

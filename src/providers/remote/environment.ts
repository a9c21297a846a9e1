/**
 * The environment a remote child starts with. The remote world's own ambient environment (a
 * container's `Config.Env`, a login's HOME) stands where a local provider uses its parent
 * environment, and gets the same upstream scrub; the harness's own environment never crosses.
 * @module dsh-remote-worlds/providers/remote/environment
 */
import { SENSITIVE_ENV_PATTERN } from '@deepseek-ai/dsh-subprocess'
import { z } from 'zod'

/**
 * Scrub `ambient` exactly as upstream `scrubbedParentEnv` scrubs the local parent environment
 * (credential-shaped names matching `SENSITIVE_ENV_PATTERN`, and every `DSH_*` name, both
 * case-insensitively), then layer `explicit` on top (a deliberate entry always survives).
 *
 * @param ambient - the remote world's ambient variables.
 * @param explicit - the spec's env; `undefined` values are tombstones that remove an entry.
 * @returns a fresh object.
 */
export function remoteChildEnv(ambient: Readonly<Record<string, string>>, explicit?: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(ambient)) {
    if (!isScrubbedName(name)) env[name] = value
  }
  for (const [name, value] of Object.entries(explicit ?? {})) {
    if (value === undefined) delete env[name]
    else env[name] = value
  }
  return env
}

/**
 * True when {@link remoteChildEnv} drops an ambient variable of this name: credential-shaped
 * (upstream `SENSITIVE_ENV_PATTERN`) or `DSH_*`, both case-insensitively.
 */
export function isScrubbedName(name: string): boolean {
  return scrubKind(name) !== undefined
}

/**
 * Why {@link remoteChildEnv} drops a variable of this name: `credential-shaped` (upstream
 * `SENSITIVE_ENV_PATTERN`: KEY, PASSWORD, SECRET or TOKEN anywhere in it), else `DSH_*` (the
 * harness's own settings); undefined when it is kept. Both case-insensitive.
 */
export function scrubKind(name: string): 'credential-shaped' | 'DSH_*' | undefined {
  if (SENSITIVE_ENV_PATTERN.test(name)) return 'credential-shaped'
  return name.toUpperCase().startsWith('DSH_') ? 'DSH_*' : undefined
}

/**
 * Parse Docker-style `NAME=value` entries (e.g. a container's `Config.Env`).
 * @param entries - entries; ones without `=` are skipped (Docker passes them through from the client).
 */
export function parseEnvEntries(entries: readonly string[] | null | undefined): Record<string, string> {
  const env: Record<string, string> = {}
  for (const entry of entries ?? []) {
    const equals = entry.indexOf('=')
    if (equals > 0) env[entry.slice(0, equals)] = entry.slice(equals + 1)
  }
  return env
}

/** What a world offers the programs of one uid (control.sh `facts`). */
export interface WorldUserFacts {
  /** True when the uid has a passwd entry (so the world gave it its HOME). */
  passwdEntry: boolean
  /**
   * For a uid without a passwd entry: the private, writable directory made for it
   * (`/tmp/dsh-remote-home-UID`), to stand as HOME; undefined otherwise or when unusable.
   */
  privateHome: string | undefined
  /**
   * For a uid without a passwd entry whose private directory is unusable (another user's, a
   * symlink, not a directory): that path; the world's HOME then stays.
   */
  refusedHome: string | undefined
  /** `locale -a` of the world; undefined when it has no `locale` program. */
  locales: readonly string[] | undefined
}

/**
 * The locale setting of a runtime: `'auto'` (default) gives programs a UTF-8 locale when the
 * world's own environment names none; a locale name (e.g. `en_US.UTF-8`) sets LANG to it;
 * `false` leaves the world's environment as it is.
 */
export type LocaleSetting = 'auto' | false | string

/** The zod schema of a {@link LocaleSetting}, shared by the runtimes' configs. */
export const LocaleSettingSchema = z.union([z.literal('auto'), z.literal(false), z.string().min(1)])

/** The locale a world's programs get, and why (for `doctor`). */
export interface LocaleChoice {
  /** LANG to add, or undefined when the world's environment stays as it is. */
  lang: string | undefined
  /**
   * Where the locale comes from: the world's own variables, the caller's LANG, C.UTF-8, the
   * configured name, `off` (kept as it is on request), or `none` (programs run in POSIX).
   */
  source: 'world' | 'caller' | 'c-utf8' | 'configured' | 'off' | 'none'
  /**
   * False when programs do not get what was chosen: no UTF-8 locale at all (`none`), or a
   * configured name the world lacks or overrides with its own LC_ALL or LC_CTYPE.
   */
  effective: boolean
  /** One sentence: what was chosen and why. */
  reason: string
}

/** The variables that choose a program's character set (POSIX locale precedence: LC_ALL, LC_CTYPE, LANG). */
const CTYPE_VARIABLES = ['LC_ALL', 'LC_CTYPE', 'LANG'] as const

/**
 * A locale name in glibc's normalized form: the codeset part lower-cased with only letters and
 * digits kept (`en_US.UTF-8` and `en_US.utf8` name the same locale; `locale -a` prints the
 * latter). Source: glibc's `_nl_normalize_codeset` (intl/l10nflist.c).
 */
export function normalizeLocaleName(name: string): string {
  const match = /^([^.@]*)(?:\.([^@]*))?(@.*)?$/.exec(name)
  if (match === null) return name
  const codeset = match[2] === undefined ? '' : `.${match[2].toLowerCase().replace(/[^a-z0-9]/g, '')}`
  return `${match[1]}${codeset}${match[3] ?? ''}`
}

/** True when the locale name's codeset is UTF-8 (`C.UTF-8`, `en_US.utf8`). */
export function isUtf8Locale(name: string): boolean {
  return /\.utf8(@|$)/.test(normalizeLocaleName(name))
}

/**
 * Choose the locale of a world's programs. With `'auto'`: nothing when the world's environment
 * already sets LC_ALL, LC_CTYPE or LANG (the world's owner chose); else the caller's LANG when
 * it is UTF-8 and the world has it; else `C.UTF-8` when the world has it; else nothing (a world
 * whose `locale -a` is unknown gets nothing: a name the C library lacks is worse than none).
 *
 * @param ambient - the world's environment for the user (before the spec's env).
 * @param available - the world's `locale -a`, or undefined when unknown.
 * @param setting - the runtime's {@link LocaleSetting}.
 * @param callerLang - the client's own LANG (only its name is used; nothing else crosses).
 */
export function chooseLocale(ambient: Readonly<Record<string, string>>, available: readonly string[] | undefined, setting: LocaleSetting, callerLang: string | undefined): LocaleChoice {
  if (setting === false) return { lang: undefined, source: 'off', effective: true, reason: 'locale setting off: the world\'s environment is kept as it is' }
  const has = (name: string): boolean => available?.some(entry => normalizeLocaleName(entry) === normalizeLocaleName(name)) ?? false
  if (setting !== 'auto') {
    const overriding = (['LC_ALL', 'LC_CTYPE'] as const).find(name => (ambient[name] ?? '') !== '')
    const missing = available !== undefined && !has(setting)
    const caveat = overriding !== undefined ? ` (but the world's own ${overriding}=${ambient[overriding]} overrides LANG)` : missing ? ' (not in the world\'s `locale -a`: its C library falls back to POSIX)' : ''
    return { lang: setting, source: 'configured', effective: overriding === undefined && !missing, reason: `LANG=${setting} as configured${caveat}` }
  }
  const own = CTYPE_VARIABLES.find(name => (ambient[name] ?? '') !== '')
  if (own !== undefined) return { lang: undefined, source: 'world', effective: true, reason: `the world's own ${own}=${ambient[own]}` }
  if (available === undefined) return { lang: undefined, source: 'none', effective: false, reason: 'the world names no locale and has no `locale -a` to choose from: programs run in the POSIX locale' }
  if (callerLang !== undefined && isUtf8Locale(callerLang) && has(callerLang)) return { lang: callerLang, source: 'caller', effective: true, reason: `LANG=${callerLang}: the caller's LANG, which the world has` }
  if (has('C.UTF-8')) return { lang: 'C.UTF-8', source: 'c-utf8', effective: true, reason: `LANG=C.UTF-8: the world names no locale${callerLang !== undefined && isUtf8Locale(callerLang) ? ` and lacks the caller's ${callerLang}` : ''}` }
  return { lang: undefined, source: 'none', effective: false, reason: `the world names no locale and has no UTF-8 one (${available.join(', ')}): programs run in the POSIX locale` }
}

/** What a world's user environment adds to its ambient variables, and why (for `doctor`). */
export interface UserEnvironment {
  /** The ambient variables with LANG and HOME applied. */
  ambient: Record<string, string>
  locale: LocaleChoice
  /** The private HOME given to a uid without a passwd entry, when one was. */
  privateHome: string | undefined
  /** The private HOME path that could not be used (see {@link WorldUserFacts.refusedHome}). */
  refusedHome: string | undefined
}

/**
 * Apply the world's user facts to its ambient environment: the chosen locale as LANG, and for
 * a uid without a passwd entry its private HOME (the engine sets HOME=/ for such a uid, where
 * dotfile writers such as git, pip and npm fail). Both runtimes compute a child's environment
 * from this, before the spec's env (which may override either).
 */
export function userEnvironment(ambient: Readonly<Record<string, string>>, facts: WorldUserFacts, setting: LocaleSetting, callerLang: string | undefined): UserEnvironment {
  const locale = chooseLocale(ambient, facts.locales, setting, callerLang)
  return {
    ambient: {
      ...ambient,
      ...(locale.lang !== undefined ? { LANG: locale.lang } : {}),
      ...(facts.privateHome !== undefined ? { HOME: facts.privateHome } : {}),
    },
    locale,
    privateHome: facts.privateHome,
    refusedHome: facts.refusedHome,
  }
}

/**
 * Whether a .NET assembly carries ReadyToRun code (issue 32, part E: the pwsh image compiles
 * PowerShell's assemblies ahead of time, docker/ready-to-run.sh). Read from the file's own bytes:
 * the PE optional header's data directory 14 is the CLI header (ECMA-335 II.25.3.3), whose
 * ManagedNativeHeader directory (offset 64) is set only in a ReadyToRun image (the runtime's
 * READYTORUN_HEADER; an IL-only assembly leaves it zero).
 * @module test/helpers/ready-to-run
 */

/** What an assembly's file holds: ReadyToRun code, IL only, or no CLI header at all. */
export type AssemblyCode = 'ReadyToRun' | 'IL only' | 'not managed'

/**
 * Classify a PE file's bytes.
 * @throws RangeError when the bytes are not a whole PE file (a header points past the end).
 */
export function assemblyCode(pe: Buffer): AssemblyCode {
  const header = pe.readUInt32LE(0x3c)
  if (pe.toString('latin1', header, header + 4) !== 'PE\0\0') throw new RangeError('not a PE file')
  const sections = pe.readUInt16LE(header + 6)
  const optionalSize = pe.readUInt16LE(header + 20)
  const optional = header + 24
  // PE32 (0x10b) keeps its data directories at 96, PE32+ (0x20b) at 112.
  const directories = optional + (pe.readUInt16LE(optional) === 0x10b ? 96 : 112)
  const cliRva = pe.readUInt32LE(directories + 14 * 8)
  if (cliRva === 0) return 'not managed'
  const table = optional + optionalSize
  for (let index = 0; index < sections; index += 1) {
    const entry = table + index * 40
    const virtualSize = pe.readUInt32LE(entry + 8)
    const virtualAddress = pe.readUInt32LE(entry + 12)
    const rawAddress = pe.readUInt32LE(entry + 20)
    if (cliRva >= virtualAddress && cliRva < virtualAddress + Math.max(virtualSize, 1)) {
      const cli = cliRva - virtualAddress + rawAddress
      return pe.readUInt32LE(cli + 64) !== 0 ? 'ReadyToRun' : 'IL only'
    }
  }
  throw new RangeError('the CLI header is in no section')
}

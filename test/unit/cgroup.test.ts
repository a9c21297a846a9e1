/**
 * cgroup.ts: locating a process's resource-limit counters from its /proc/PID/cgroup and
 * mountinfo, and parsing the counter and limit files, for cgroup v1 and v2. Every input says
 * where it comes from.
 */
import { describe, expect, it } from 'vitest'
import { cgroupDirectory, effectiveLimit, locateCgroupCounters, parseCgroupMounts, parseFlatKeyed, parseLimit, parseProcCgroup } from '../../src/providers/remote/cgroup.ts'
import { describeResourceEvent, formatBytes, resourceEventsBetween } from '../../src/providers/remote/resource-events.ts'

const DOCKER_ID = '3b2bcd55fcd2218462cfdcf95c5caa3ca4a4cdd5dd07463b98e6984d65603d04'

/** Captured on this project's test machine (cgroup v1 for memory and pids): `cat /proc/self/cgroup` in a container of the project image. */
const V1_CONTAINER_CGROUP = [
  'systemd', 'pids', 'blkio', 'freezer', 'devices', 'memory', 'cpuset', 'cpuacct', 'cpu',
].map((name, index) => `${9 - index}:${name === 'systemd' ? 'name=systemd' : name}:/docker/${DOCKER_ID}`).join('\n') + `\n0::/docker/${DOCKER_ID}\n`

/** Captured with it: the cgroup lines of that container's /proc/self/mountinfo (no cgroup namespace: each root is /docker/ID). */
const V1_CONTAINER_MOUNTINFO = [
  '79 78 0:46 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755',
  ...[['80', '0:29', 'cpu'], ['81', '0:30', 'cpuacct'], ['82', '0:31', 'cpuset'], ['83', '0:32', 'memory'], ['84', '0:33', 'devices'], ['85', '0:34', 'freezer'], ['86', '0:35', 'blkio'], ['87', '0:36', 'pids'], ['88', '0:37', 'name=systemd']]
    .map(([id, dev, controller]) => `${id} 79 ${dev} /docker/${DOCKER_ID} /sys/fs/cgroup/${controller === 'name=systemd' ? 'systemd' : controller} ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,${controller}`),
  '',
].join('\n')

/** Captured on the same machine outside containers: a hybrid host (v1 controllers, an empty cgroup2 at /sys/fs/cgroup/unified). */
const V1_HOST_CGROUP = '9:name=systemd:/\n8:pids:/\n7:blkio:/\n6:freezer:/\n5:devices:/\n4:memory:/process_api/94b3e844ee23840ccb760a0925ce1ecf\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n'
const V1_HOST_MOUNTINFO = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
  '40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
  '',
].join('\n')

/**
 * A cgroup v2 host's mountinfo and /proc/self/cgroup, from the v2 case of Test_getMemoryCgroupPath in
 * martian-lang/martian, martian/util/cgroups_linux_test.go (commit 1efaf6245065f0102cfa3d457b185e1062b23ce8):
 * a systemd host (device-mapper root, efivars, nsdelegate,memory_recursiveprot), the process in
 * system.slice/martian.service. Lines other than the cgroup2 mount are kept as they are there.
 */
const V2_MOUNTINFO = `22 27 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
23 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/mapper/thing--vg-root rw,errors=remount-ro
31 22 0:26 / /sys/fs/cgroup rw,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
32 22 0:27 / /sys/fs/pstore rw,nosuid,nodev,noexec,relatime shared:10 - pstore pstore rw
33 22 0:28 / /sys/firmware/efi/efivars rw,nosuid,nodev,noexec,relatime shared:11 - efivarfs efivarfs rw
`
const V2_CGROUP = '0::/system.slice/martian.service\n'

/**
 * A v1 mountinfo inside a container on a systemd host (roots are the container's scope), from
 * `systemdMountinfo` in opencontainers/runc, libcontainer/cgroups/utils_test.go (cgroup lines).
 * runc's test has no /proc/self/cgroup to go with it: the one below is written for this test
 * (the container's processes in the scope, as the roots say).
 */
const SCOPE = '/system.slice/docker-dc4eaa1a34ec4d593bc0125d31eea823a1d76ae483aeb1409cca80304e34da2e.scope'
const V1_SYSTEMD_MOUNTINFO = `120 119 0:39 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
121 120 0:19 ${SCOPE} /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,xattr,release_agent=/lib/systemd/systemd-cgroups-agent,name=systemd
124 120 0:22 ${SCOPE} /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
128 120 0:26 ${SCOPE} /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu,cpuacct
`

describe('locateCgroupCounters', () => {
  it('v1 in a container without a cgroup namespace: /docker/ID maps through the mount root to the mount point itself', () => {
    expect(locateCgroupCounters(V1_CONTAINER_CGROUP, V1_CONTAINER_MOUNTINFO)).toEqual({
      kind: 'found',
      plan: {
        version: 1,
        memory: { eventsFile: '/sys/fs/cgroup/memory/memory.oom_control', key: 'oom_kill', limitFiles: ['/sys/fs/cgroup/memory/memory.limit_in_bytes'] },
        pids: { eventsFile: '/sys/fs/cgroup/pids/pids.events', key: 'max', limitFiles: ['/sys/fs/cgroup/pids/pids.max'] },
      },
    })
  })

  it('v1 on a hybrid host: the v1 memory and pids hierarchies are taken, limits walked up to the mount point', () => {
    expect(locateCgroupCounters(V1_HOST_CGROUP, V1_HOST_MOUNTINFO)).toEqual({
      kind: 'found',
      plan: {
        version: 1,
        memory: {
          eventsFile: '/sys/fs/cgroup/memory/process_api/94b3e844ee23840ccb760a0925ce1ecf/memory.oom_control',
          key: 'oom_kill',
          limitFiles: ['/sys/fs/cgroup/memory/process_api/94b3e844ee23840ccb760a0925ce1ecf/memory.limit_in_bytes', '/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes', '/sys/fs/cgroup/memory/memory.limit_in_bytes'],
        },
        pids: { eventsFile: '/sys/fs/cgroup/pids/pids.events', key: 'max', limitFiles: ['/sys/fs/cgroup/pids/pids.max'] },
      },
    })
  })

  it('v1 in a container on a systemd host (runc fixture): the scope root maps to the mount point; no pids mount, so memory only', () => {
    expect(locateCgroupCounters(`4:memory:${SCOPE}\n1:name=systemd:${SCOPE}\n`, V1_SYSTEMD_MOUNTINFO)).toEqual({
      kind: 'found',
      plan: { version: 1, memory: { eventsFile: '/sys/fs/cgroup/memory/memory.oom_control', key: 'oom_kill', limitFiles: ['/sys/fs/cgroup/memory/memory.limit_in_bytes'] }, pids: undefined },
    })
  })

  it('v2 (martian fixture): memory.events and pids.events of the unit, memory.max and pids.max walked up to the root', () => {
    const unit = '/sys/fs/cgroup/system.slice/martian.service'
    expect(locateCgroupCounters(V2_CGROUP, V2_MOUNTINFO)).toEqual({
      kind: 'found',
      plan: {
        version: 2,
        memory: { eventsFile: `${unit}/memory.events`, key: 'oom_kill', limitFiles: [`${unit}/memory.max`, '/sys/fs/cgroup/system.slice/memory.max', '/sys/fs/cgroup/memory.max'] },
        pids: { eventsFile: `${unit}/pids.events`, key: 'max', limitFiles: [`${unit}/pids.max`, '/sys/fs/cgroup/system.slice/pids.max', '/sys/fs/cgroup/pids.max'] },
      },
    })
  })

  it('none, with the reason: no cgroup mounts; a cgroup outside every mount root', () => {
    expect(locateCgroupCounters(V2_CGROUP, '23 27 0:21 / /proc rw - proc proc rw\n')).toEqual({ kind: 'none', reason: 'no cgroup filesystem is mounted in the world' })
    expect(locateCgroupCounters('0::/elsewhere\n', '31 22 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n')).toEqual({
      kind: 'none',
      reason: 'the memory cgroup (/elsewhere) is below no mounted cgroup root; the pids cgroup (/elsewhere) is below no mounted cgroup root',
    })
    expect(locateCgroupCounters('', V2_MOUNTINFO)).toEqual({ kind: 'none', reason: '/proc/self/cgroup names no cgroup' })
  })
})

describe('parsing', () => {
  it('parseProcCgroup: hierarchy, controllers and path of each line (v2: hierarchy 0, no controllers)', () => {
    expect(parseProcCgroup('4:memory:/docker/x\n2:cpu,cpuacct:/\n0::/user.slice\n')).toEqual([
      { hierarchy: 4, controllers: ['memory'], path: '/docker/x' },
      { hierarchy: 2, controllers: ['cpu', 'cpuacct'], path: '/' },
      { hierarchy: 0, controllers: [], path: '/user.slice' },
    ])
  })

  it('parseCgroupMounts: root and mount point with octal escapes decoded, super options split', () => {
    expect(parseCgroupMounts('40 30 0:26 /a\\040b /mnt/cg\\040v2 rw shared:3 - cgroup2 cgroup2 rw,nsdelegate\n')).toEqual([
      { fsType: 'cgroup2', root: '/a b', mountPoint: '/mnt/cg v2', superOptions: ['rw', 'nsdelegate'] },
    ])
    expect(cgroupDirectory({ fsType: 'cgroup2', root: '/a b', mountPoint: '/mnt/cg v2', superOptions: [] }, '/a b/c')).toEqual({ directory: '/mnt/cg v2/c', relative: '/c' })
    expect(cgroupDirectory({ fsType: 'cgroup2', root: '/a', mountPoint: '/m', superOptions: [] }, '/ab')).toBeUndefined()
  })

  it('v1 files as captured in a 256 MiB, 64-pids container on this machine, before and after one OOM kill', () => {
    expect(parseFlatKeyed('oom_kill_disable 0\nunder_oom 0\noom_kill 0\n').get('oom_kill')).toBe(0)
    expect(parseFlatKeyed('oom_kill_disable 0\nunder_oom 0\noom_kill 1\n').get('oom_kill')).toBe(1)
    expect(parseFlatKeyed('max 0\n').get('max')).toBe(0)
    expect(parseLimit('268435456\n')).toBe(268435456)
    expect(parseLimit('64\n')).toBe(64)
    // v1's "no limit" is PAGE_COUNTER_MAX pages (cgroup-v1/memory.rst), e.g. with 4 KiB pages:
    expect(parseLimit('9223372036854771712\n')).toBeNull()
  })

  it('v2 files in the format of cgroup-v2.rst (NOT captured: no captured memory.events/pids.events was found in public test data)', () => {
    const events = parseFlatKeyed('low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n')
    expect(events.get('oom_kill')).toBe(2)
    expect(parseFlatKeyed('max 3\n').get('max')).toBe(3)
    expect(parseLimit('max\n')).toBeNull()
    expect(parseLimit('garbage')).toBeUndefined()
    // The effective limit is the smallest set along the chain; unreadable files are skipped.
    expect(effectiveLimit(['max\n', '536870912\n', undefined, 'max\n'])).toBe(536870912)
    expect(effectiveLimit(['max\n', 'max\n'])).toBeNull()
  })
})

describe('events', () => {
  const reading = (oomKill: number | undefined, pidsMax: number | undefined) => ({ oomKill, pidsMax, memoryLimit: 268435456, pidsLimit: 64 })

  it('a counter that grew is an event with the growth and the later limit; unreadable or unchanged counters report nothing', () => {
    expect(resourceEventsBetween(reading(2, 0), reading(3, 0))).toEqual([{ kind: 'oom_kill', count: 1, limitBytes: 268435456 }])
    expect(resourceEventsBetween(reading(0, 5), reading(0, 7))).toEqual([{ kind: 'pids_max', count: 2, limit: 64 }])
    expect(resourceEventsBetween(reading(0, 0), reading(0, 0))).toEqual([])
    expect(resourceEventsBetween(reading(undefined, 0), reading(1, 0))).toEqual([])
  })

  it('the transcript sentence names the limit, in binary units', () => {
    expect(describeResourceEvent({ kind: 'oom_kill', count: 1, limitBytes: 268435456 })).toBe("the world's memory limit (256 MiB) killed 1 process (oom_kill)")
    expect(describeResourceEvent({ kind: 'oom_kill', count: 2, limitBytes: null })).toBe("the out-of-memory killer killed 2 processes of the world (oom_kill; the world's cgroup sets no memory limit)")
    expect(describeResourceEvent({ kind: 'pids_max', count: 3, limit: 64 })).toBe("the world's process limit (64) refused 3 forks (pids.events max)")
    expect(formatBytes(1536 * 1024 * 1024)).toBe('1.5 GiB')
  })
})

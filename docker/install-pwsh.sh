#!/bin/sh
# Installs PowerShell into the project image, from a context directory (first argument,
# default /ctx) holding:
#   dotnet/      a .NET runtime: the `dotnet` host, host/fxr and shared/Microsoft.NETCore.App
#   powershell/  the unix payload of the PowerShell global tool (NuGet package PowerShell:
#                tools/<tfm>/any/unix, with pwsh.dll)
#   libicu.deb   Debian's libicu72 (the .NET runtime's globalization needs ICU) - optional
#                when libicu72 is installed already (docker/Dockerfile.pwsh installs it with apt)
# Run by docker/ensure-world.sh in a container of the project image (no registry, no network)
# and by docker/Dockerfile.pwsh.
set -eu
ctx="${1:-/ctx}"
cp -a "$ctx/dotnet" /usr/share/dotnet
mkdir -p /opt/microsoft/powershell
cp -a "$ctx/powershell" /opt/microsoft/powershell/7
if [ -f "$ctx/libicu.deb" ]; then dpkg -i "$ctx/libicu.deb" >/dev/null; fi
# The global tool's own `pwsh` is a shim that starts `dotnet pwsh.dll` as a CHILD process, so
# the terminal's published pid would be the shim's and Ctrl-C and the foreground probe would
# meet two processes. This launcher execs the runtime instead: pwsh runs as this very process.
cat >/usr/local/bin/pwsh <<'LAUNCHER'
#!/bin/sh
exec /usr/share/dotnet/dotnet /opt/microsoft/powershell/7/pwsh.dll "$@"
LAUNCHER
chmod 755 /usr/local/bin/pwsh
grep -qx /usr/local/bin/pwsh /etc/shells || echo /usr/local/bin/pwsh >>/etc/shells
# PowerShell's first start builds caches under the user's home; nothing else is needed.
/usr/local/bin/pwsh -NoLogo -NoProfile -Command '$PSVersionTable.PSVersion.ToString()' >/dev/null

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
# NuGet's extraction leaves the payload owner-only executable: every user runs PowerShell.
chmod -R a+rX /opt/microsoft/powershell/7
chmod 755 /opt/microsoft/powershell/7/pwsh
# The payload's `pwsh` is a .NET apphost (it finds the runtime in /usr/share/dotnet) and is what
# PowerShell starts for Start-Job ($PSHOME/pwsh). The global tool's own `pwsh` command, by
# contrast, is a shim that starts `dotnet pwsh.dll` as a CHILD process, so a terminal's
# published pid would be the shim's and Ctrl-C and the foreground probe would meet two processes.
ln -sf /opt/microsoft/powershell/7/pwsh /usr/local/bin/pwsh
grep -qx /usr/local/bin/pwsh /etc/shells || echo /usr/local/bin/pwsh >>/etc/shells
# A smoke check: the build fails here when PowerShell cannot start in the image.
/usr/local/bin/pwsh -NoLogo -NoProfile -Command '$PSVersionTable.PSVersion.ToString()' >/dev/null

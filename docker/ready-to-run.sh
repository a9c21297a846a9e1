#!/bin/sh
# Compiles PowerShell's own assemblies ahead of time (ReadyToRun) for the .NET runtime the image
# ships, so a pwsh start runs native code instead of JIT-compiling its engine (issue 32, part E).
#   docker/ready-to-run.sh PAYLOAD FRAMEWORK WORK
#     PAYLOAD    the unix payload of the PowerShell global tool (pwsh.dll and its assemblies)
#     FRAMEWORK  the shared/Microsoft.NETCore.App/<version> directory the image will run it on
#     WORK       a scratch directory (crossgen2 is restored there)
# Run on the build host by docker/ensure-world.sh and in the SDK stage of docker/Dockerfile.pwsh;
# needs the .NET SDK (`dotnet restore` fetches the crossgen2 package of FRAMEWORK's version from
# NuGet) and changes PAYLOAD in place.
#
# Why: the global tool's assemblies are IL only (their CLI headers carry no ReadyToRun header),
# unlike the runtime's own, which are ReadyToRun; measured in a container of the image on this
# project's 2-core machine, `pwsh -NoLogo -NoProfile -Command exit` took 0.9-1.2 s with the IL
# assemblies and 0.40 s with these compiled. Runtime switches measured beside it
# (DOTNET_TieredPGO=0, DOTNET_TC_QuickJitForLoops=0) changed nothing beyond the noise and are not
# set. What is compiled: every assembly at the payload's top (the engine, the host, the cmdlets
# and their dependencies, loaded through pwsh.deps.json) and PSReadLine's, which every
# interactive start loads; not ref/ (reference assemblies), runtimes/ or the other modules. An
# assembly crossgen2 refuses (already compiled, or nothing to compile) stays as it was: the
# runtime runs IL and ReadyToRun assemblies side by side.
set -eu
payload=$1 framework=$2 work=$3
version=${framework%/}; version=${version##*/}
mkdir -p "$work/out"
cat >"$work/crossgen2.csproj" <<EOF
<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup><TargetFramework>net${version%%.*}.0</TargetFramework></PropertyGroup>
  <ItemGroup><PackageDownload Include="Microsoft.NETCore.App.Crossgen2.linux-x64" Version="[$version]" /></ItemGroup>
</Project>
EOF
case $(uname -m) in
  x86_64) arch=x64 ;;
  aarch64) arch=arm64 ;;
  *) echo "ready-to-run: no crossgen2 target for $(uname -m); PowerShell stays IL" >&2; exit 0 ;;
esac
sed -i "s/linux-x64/linux-$arch/" "$work/crossgen2.csproj"
dotnet restore "$work/crossgen2.csproj" --packages "$work/packages" >"$work/restore.log" 2>&1 || {
  echo "ready-to-run: restoring crossgen2 $version failed:" >&2; tail -n 20 "$work/restore.log" >&2; exit 1; }
crossgen2="$work/packages/microsoft.netcore.app.crossgen2.linux-$arch/$version/tools/crossgen2"
[ -x "$crossgen2" ] || { echo "ready-to-run: no crossgen2 at $crossgen2" >&2; exit 1; }
compiled=0 kept=0
for dll in "$payload"/*.dll "$payload"/Modules/PSReadLine/*.dll; do
  [ -f "$dll" ] || continue
  out="$work/out/${dll##*/}"
  if "$crossgen2" "$dll" -o "$out" -r "$framework/*.dll" -r "$payload/*.dll" -r "${dll%/*}/*.dll" \
      --targetos:linux --targetarch:"$arch" -O >"$work/crossgen2.log" 2>&1; then
    # The mode of the original (a+rX is set by install-pwsh.sh); the content of the compiled copy.
    cat "$out" >"$dll"
    compiled=$((compiled + 1))
  else
    kept=$((kept + 1))
  fi
  rm -f "$out"
done
echo "ready-to-run: $compiled assemblies compiled for .NET $version ($arch), $kept kept as IL" >&2

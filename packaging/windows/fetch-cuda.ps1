# Downloads the parts of the CUDA toolkit and cuDNN that SeedVAE Studio builds against from NVIDIA's
# redistributable archives (the same files the full installers contain, no driver) and merges them
# into one folder laid out like a toolkit (bin, include, lib\x64). Used by windows-build.yml.
#
#   fetch-cuda.ps1 -CudaVersion 13.0.2 -CudnnVersion 9.13.0 -Destination C:\cuda
#
# The component lists come from
#   https://developer.download.nvidia.com/compute/cuda/redist/redistrib_<CudaVersion>.json
#   https://developer.download.nvidia.com/compute/cudnn/redist/redistrib_<CudnnVersion>.json
param(
  [Parameter(Mandatory = $true)][string]$CudaVersion,
  [Parameter(Mandatory = $true)][string]$CudnnVersion,
  [Parameter(Mandatory = $true)][string]$Destination
)
$ErrorActionPreference = "Stop"
$ProgressPreference = "SilentlyContinue"
$platform = "windows-x86_64"
$cudaMajor = $CudaVersion.Split(".")[0]
# nvcc and its host-side pieces, the runtime, cuBLAS/cuBLASLt, NVRTC (cuDNN's runtime-compiled
# engines), the CCCL headers (cub/thrust/libcu++), profiler API headers (nvtx).
$cudaComponents = @("cuda_nvcc", "cuda_crt", "cuda_cudart", "cuda_cccl", "cuda_nvrtc", "libcublas",
                    "cuda_profiler_api", "cuda_nvtx", "libnvvm", "libnvptxcompiler")

function Merge-Archive([string]$base, [string]$relative) {
  $url = "$base/$relative"
  $zip = Join-Path $env:RUNNER_TEMP ([IO.Path]::GetFileName($relative))
  Write-Host "download $url"
  Invoke-WebRequest -Uri $url -OutFile $zip
  $unpacked = Join-Path $env:RUNNER_TEMP ([IO.Path]::GetFileNameWithoutExtension($relative))
  Expand-Archive -Path $zip -DestinationPath $unpacked -Force
  $top = Get-ChildItem $unpacked | Select-Object -First 1   # <name>-<platform>-<version>-archive
  Copy-Item -Path (Join-Path $top.FullName "*") -Destination $Destination -Recurse -Force
  Remove-Item $zip, $unpacked -Recurse -Force
}

New-Item -ItemType Directory -Force -Path $Destination | Out-Null
$cudaBase = "https://developer.download.nvidia.com/compute/cuda/redist"
$cuda = Invoke-RestMethod "$cudaBase/redistrib_$CudaVersion.json"
foreach ($name in $cudaComponents) {
  $entry = $cuda.$name
  if ($null -eq $entry -or $null -eq $entry.$platform) { Write-Host "skip $name (not in $CudaVersion)"; continue }
  Merge-Archive $cudaBase $entry.$platform.relative_path
}

# cuDNN 9 publishes one archive per CUDA major version ("cuda12", "cuda13") under the platform.
$cudnnBase = "https://developer.download.nvidia.com/compute/cudnn/redist"
$cudnn = Invoke-RestMethod "$cudnnBase/redistrib_$CudnnVersion.json"
$cudnnEntry = $cudnn.cudnn.$platform
if ($null -ne $cudnnEntry."cuda$cudaMajor") { $cudnnEntry = $cudnnEntry."cuda$cudaMajor" }
Merge-Archive $cudnnBase $cudnnEntry.relative_path

# CUDA 13 puts the Windows DLLs under bin\x64; older layouts in bin. cmake/Packaging.cmake looks in
# both. Report what the package will take.
Get-ChildItem -Recurse -Path (Join-Path $Destination "bin") -Filter *.dll | ForEach-Object { Write-Host $_.FullName }
"CUDA_PATH=$Destination" | Out-File -FilePath $env:GITHUB_ENV -Append -Encoding utf8
(Join-Path $Destination "bin") | Out-File -FilePath $env:GITHUB_PATH -Append -Encoding utf8
(Join-Path $Destination "bin\x64") | Out-File -FilePath $env:GITHUB_PATH -Append -Encoding utf8

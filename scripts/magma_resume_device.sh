#!/usr/bin/env bash
# Issue 34 item 3 on a GPU machine without a package index: real magma built cold, then a fresh
# build stopped with SIGINT at half of its ninja steps, then the rerun (scripts/magma_resume.py),
# with the machine prepared by scripts/magma_gpu_proof.sh (carried site, condapipe, ccache, tree).
#
# usage: scripts/magma_resume_device.sh CARRY_DIR [--cuda 13.0] [--arch 9.0] [--phase all|cold|interrupt|rerun]
#                                                 [--stop-at 0.5] [--rerun-stop-at F]
#   CARRY_DIR (e.g. .magma-resume, git-ignored) holds, each part <= 60 MiB:
#     site-cp312.tar.xz  scripts/postbuild_bench_carry.sh WHEELS .magma-resume cmake ninja
#                        (condapipe's dependencies plus the cmake and ninja wheels --build-tools
#                        wheels makes its tool channel of)
#     magma-2.6.1.tar.xz the v2.6.1 tag after `make generate` (see scripts/magma_gpu_proof.sh)
#     tools/ccache_*.deb Debian's ccache (the default compile cache needs ccache on PATH)
#   OUT (default ./magma-resume-out) gets magma_resume.md/.json and the logs; WORK (default
#   /tmp/magma-resume) the work dirs, kept between phases run as separate commands.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OUT=${OUT:-$root/magma-resume-out}
export WORK=${WORK:-/tmp/magma-resume}
export PROOF=$root/scripts/magma_resume.py
# the three builds of one call: a cold build on 64 cores ~2-5 min, the rest less
export PROOF_TIMEOUT=${PROOF_TIMEOUT:-3000}
exec "$root/scripts/magma_gpu_proof.sh" "$@"

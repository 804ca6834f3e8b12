#!/usr/bin/env bash
# Builds the programs of tests/compat against real libtorch (Debian's
# libtorch-dev, 1.13) and runs them, proving their spellings are libtorch's
# own: the same sources that build through kiln::torch_compat. Not part of CI
# (libtorch-dev is large, and building against it takes about 20 s a program);
# run it by hand:
#
#   apt-get install libtorch-dev        # once
#   tests/compat/against_libtorch.sh    # from the repository root
#
# The MNIST-style programs read idx files made with MNIST's own counts
# (make_mnist_idx.py --full: 60000 and 10000 images), which libtorch's
# datasets::MNIST insists on. ddp_mpi is built only where libtorch has c10d's
# MPI process group (Debian's does not: it is built without USE_C10D_MPI).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
inc=/usr/include/torch/csrc/api/include
if [ ! -d "$inc" ]; then
  echo "against_libtorch: libtorch's headers are not installed (apt-get install libtorch-dev)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$root/tests/compat/make_mnist_idx.py" "$root/examples/data/digits.csv.gz" "$work/data" --full

build() {
  g++ -std=c++17 -O1 -I"$inc" "$root/tests/compat/$1.cpp" -o "$work/$1" -ltorch -ltorch_cpu -lc10 -pthread
}
programs=(spellings autograd_tutorial mnist_lenet dcgan_step custom_dataset sequence_rnn uint8_images
          tabular_regression denoising_autoencoder transformer_classifier shapes_vae grouped_finetune
          encoder_tagger super_resolution sequence_conv1d point_cloud seq2seq_transformer record_runs
          resnet_checkpoint char_language_model metric_critic token_sampler)
if grep -q "define USE_C10D_MPI" /usr/include/torch/csrc/distributed/c10d/*.h* 2>/dev/null; then
  programs+=(ddp_mpi)
else
  echo "against_libtorch: ddp_mpi skipped (this libtorch has no MPI process group)"
fi
start=$SECONDS
for p in "${programs[@]}"; do
  t0=$SECONDS
  build "$p"
  echo "== $p (built in $((SECONDS - t0)) s)"
  case "$p" in
    mnist_lenet) (cd "$work" && ./"$p" "$work/data" 24) ;;
    dcgan_step) (cd "$work" && ./"$p" "$work/data" 6) ;;
    ddp_mpi) (cd "$work" && ./"$p" "$work/data" 1) ;;
    sequence_rnn) (cd "$work" && ./"$p" "$work/data" 30) ;;
    grouped_finetune) (cd "$work" && ./"$p" "$work") ;;
    super_resolution | sequence_conv1d | point_cloud | seq2seq_transformer | record_runs | \
      resnet_checkpoint | char_language_model | metric_critic)
      # Every number it prints is determined: libtorch must still print the
      # file the Kiln test compares against.
      (cd "$work" && ./"$p") | tee "$work/$p.out"
      python3 "$root/tests/compat/compare_runs.py" --outputs "$root/tests/compat/$p.libtorch.txt" \
        "$work/$p.out" ;;
    *) (cd "$work" && ./"$p" "$work/data") ;;
  esac
done
echo "against_libtorch: ${#programs[@]} programs built and ran against libtorch in $((SECONDS - start)) s"

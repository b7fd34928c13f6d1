# Job files for the end-to-end scripts (sourced).
# synthetic_job FILE MODEL [LINE...]: a job training MODEL on learnable
# synthetic data (512 training and 128 test samples) at batch 32; each LINE
# is appended under [train], or starts a section of its own ("[optimizer]").
synthetic_job() {
  local file=$1 model=$2
  shift 2
  {
    printf '[job]\nmodel = %s\n[data]\nsource = synthetic\n' "$model"
    printf 'synthetic_train_samples = 512\nsynthetic_test_samples = 128\n[train]\nbatch_size = 32\n'
    printf '%s\n' "$@"
  } >"$file"
}

//! Generates the tonic/prost code of `codebutler.runner.v1` with the vendored `protoc`.

const PROTOS: &[&str] = &[
    "codebutler/runner/v1/runner.proto",
    "codebutler/runner/v1/admin.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // No `protoc` is assumed on the machine: use the vendored binary, set through the
    // prost config rather than the `PROTOC` environment variable.
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    // Well-known types (`google/protobuf/*.proto`) come with the vendored binary.
    let well_known = protoc_bin_vendored::include_path()?;
    let well_known = well_known.to_str().ok_or("non-UTF-8 protoc include path")?;

    tonic_prost_build::configure().compile_with_config(config, PROTOS, &[".", well_known])?;

    // `compile_with_config` emits no rerun directives of its own.
    println!("cargo:rerun-if-changed=build.rs");
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    Ok(())
}

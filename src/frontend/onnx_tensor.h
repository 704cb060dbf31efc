// Internal: conversion between onnx::TensorProto and Tensor.
#pragma once

#include "ir/tensor.h"
#include "support/error.h"

#include <onnx/onnx_pb.h>
#include <optional>
#include <string>

namespace tunec::onnx_import {

/// The DType of an ONNX TensorProto_DataType, or nullopt (string, complex, ...).
std::optional<DType> dtypeFromOnnx(int elemType);
int dtypeToOnnx(DType dtype);
/// Human-readable name of an ONNX element type ("STRING").
std::string onnxTypeName(int elemType);

/// Converts a TensorProto (typed fields, raw_data, or external data under baseDir).
Expected<Tensor> tensorFromProto(const onnx::TensorProto& proto, const std::string& baseDir);
/// Fills a TensorProto with raw_data.
void tensorToProto(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto);

} // namespace tunec::onnx_import

// SPDX-License-Identifier: MIT
// Errors, random streams, warps and sampling.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/core/noise.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/warp.hpp"

namespace specdec::python {

namespace {

/// specdec.Error: a ValueError with the C++ error's `argument` and `problem` as attributes.
void register_error(py::module_& m) {
  static py::exception<Error> exception(m, "Error", PyExc_ValueError);
  exception.doc() =
      "A bad argument: a ValueError whose `argument` names the argument (e.g. 'target[3]') and\n"
      "whose `problem` says what is wrong with it; str(error) is 'argument: problem'.";
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const Error& e) {
      py::object error = py::reinterpret_borrow<py::object>(exception.ptr())(e.what());
      error.attr("argument") = e.argument();
      error.attr("problem") = e.problem();
      PyErr_SetObject(exception.ptr(), error.ptr());
    }
  });
}

/// RandomStream.uniforms and .gumbels: draws first .. first + count - 1 by Fill, as float32.
template <void (*Fill)(const RandomStream&, std::uint32_t, std::span<float>)>
py::object draws(const RandomStream& s, std::int64_t count, std::uint32_t first) {
  if (count < 0) throw Error("count", fmt::format("{} is negative", count));
  Output<float> out({count}, ArrayKind::numpy);
  Fill(s, first, out.values());
  return out.result();
}

std::string repr(const RandomStream& s) {
  return fmt::format("RandomStream(seed={}, sequence={}, position={}, node={}, domain=Domain.{})",
                     s.seed, s.sequence, s.position, s.node,
                     s.domain == Domain::kDraft    ? "DRAFT"
                     : s.domain == Domain::kVerify ? "VERIFY"
                     : s.domain == Domain::kSample ? "SAMPLE"
                                                   : "USER");
}

/// Warps each row of a 1-D row or a 2-D [rows, vocab] matrix; the output is float32.
template <class Fn>
py::object warp_rows(py::handle input, std::string_view name, Fn&& warp_one) {
  const Array in = rows_arg(input, name);
  if (in.ndim() != 1 && in.ndim() != 2) {
    throw Error(std::string(name), fmt::format("has {} dimensions; expected 1 (a row) or 2 (rows)", in.ndim()));
  }
  const std::int64_t vocab = in.shape.back();
  const std::int64_t rows = in.ndim() == 2 ? in.dim(0) : 1;
  Output<float> out(in.shape, kind_of(in));
  visit_floats(in, name, [&]<class T>(std::span<const T> values) {
    py::gil_scoped_release unlocked;
    for (std::int64_t r = 0; r < rows; ++r) {
      warp_one(values.subspan(static_cast<std::size_t>(r * vocab), static_cast<std::size_t>(vocab)),
               out.values().subspan(static_cast<std::size_t>(r * vocab), static_cast<std::size_t>(vocab)));
    }
  });
  return out.result();
}

}  // namespace

void bind_core(py::module_& m) {
  register_error(m);

  py::enum_<Domain>(m, "Domain", "Which part of decoding a random stream serves.")
      .value("DRAFT", Domain::kDraft, "drafting (i.i.d. draws, Gumbel noise, beam sampling)")
      .value("VERIFY", Domain::kVerify, "acceptance tests and correction / bonus draws")
      .value("SAMPLE", Domain::kSample, "plain sampling from the target")
      .value("USER", Domain::kUser, "free for callers");

  py::class_<RandomStream>(m, "RandomStream",
                           "The random numbers of one (seed, sequence, position, node, domain): a\n"
                           "Philox4x32-10 stream, identical to the C++ and CUDA streams.")
      .def(py::init([](std::uint64_t seed, std::uint32_t sequence, std::uint32_t position,
                       std::uint32_t node, Domain domain) {
             if (node > kMaxNode) throw Error("node", fmt::format("{} is above {}", node, kMaxNode));
             return RandomStream{seed, sequence, position, node, domain};
           }),
           py::kw_only(), py::arg("seed") = 0, py::arg("sequence") = 0, py::arg("position") = 0,
           py::arg("node") = 0, py::arg("domain") = Domain::kVerify)
      SPECDEC_FIELDS(RandomStream, seed, sequence, position, node, domain)
      .def("uniform", &RandomStream::uniform, py::arg("draw"), "Draw `draw` as a uniform in (0, 1).")
      .def("gumbel", &RandomStream::gumbel, py::arg("draw"), "Draw `draw` as a standard Gumbel.")
      .def("at_node", &RandomStream::at_node, py::arg("node"), "The same stream at another node.")
      .def("at_position", &RandomStream::at_position, py::arg("position"))
      .def("in_domain", &RandomStream::in_domain, py::arg("domain"))
      .def("uniforms", &draws<fill_uniforms>, py::arg("count"), py::arg("first") = 0,
           "Draws first .. first + count - 1 as uniforms in (0, 1) (a float32 NumPy array).")
      .def("gumbels", &draws<fill_gumbels>, py::arg("count"), py::arg("first") = 0,
           "Draws first .. first + count - 1 as standard Gumbels (a float32 NumPy array).")
      .def("__repr__", &repr);

  py::class_<Warp>(m, "Warp",
                   "How a row of logits becomes the distribution sampled from: temperature\n"
                   "(0 = greedy), then top-k (0 = off), top-p (1 = off) and min-p (0 = off).")
      .def(py::init([](float temperature, std::int32_t top_k, float top_p, float min_p) {
             return Warp{temperature, top_k, top_p, min_p};
           }),
           py::kw_only(), py::arg("temperature") = 1.0f, py::arg("top_k") = 0,
           py::arg("top_p") = 1.0f, py::arg("min_p") = 0.0f)
      SPECDEC_FIELDS(Warp, temperature, top_k, top_p, min_p)
      .def("is_greedy", &Warp::is_greedy)
      .def("is_identity", &Warp::is_identity)
      .def("validate", &Warp::validate, py::arg("vocab"),
           "Raises specdec.Error naming the first field that is bad for a vocabulary of `vocab`.")
      .def("__repr__", [](const Warp& w) {
        return fmt::format("Warp(temperature={}, top_k={}, top_p={}, min_p={})", w.temperature,
                           w.top_k, w.top_p, w.min_p);
      });

  m.def(
      "warp_logits",
      [](const Warp& warp, py::handle logits) {
        return warp_rows(logits, "logits", [&]<class T>(std::span<const T> row, std::span<float> out) {
          warp_logits<T>(warp, row, out, thread_workspace());
        });
      },
      py::arg("warp"), py::arg("logits"),
      "The warped distribution of a row of logits (or of each row of a 2-D array), as float32.\n"
      "float32, float16 and bfloat16 logits are read as they are.");
  m.def(
      "warp_probabilities",
      [](const Warp& warp, py::handle probabilities) {
        return warp_rows(probabilities, "probabilities",
                         [&]<class T>(std::span<const T> row, std::span<float> out) {
                           warp_probabilities<T>(warp, row, out, thread_workspace());
                         });
      },
      py::arg("warp"), py::arg("probabilities"),
      "The warped distribution of a probability row (or of each row of a 2-D array), as float32.");
  m.def(
      "sample",
      [](py::handle probabilities, float u) {
        const Array row = rows_f32_arg(probabilities, "probabilities", 1);
        return sample(row.span<float>("probabilities"), u);
      },
      py::arg("probabilities"), py::arg("u"),
      "The token a uniform u in (0, 1) selects from a probability row by inverse CDF.");
}

}  // namespace specdec::python

